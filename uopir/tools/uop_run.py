"""uop-run: execute a .uop program at any stage on a backend, print its outputs, optionally check them.

    uop-run FILE|- [--backend=NAME|all] [-p PIPELINE] [--input NAME=x.npy]... [--var NAME=N]... [--seed N]
            [--check [--exact]] [-o out.npz|out.npy]

What runs, by stage (the input's root):
- a tensor-level graph (`core.sink` of tensor values; a schedule of `tensor.call`s counts too): its `tensor.buffer`s
  are the inputs and the sink's operands the outputs. The backend's pipeline lowers it, only the passes it still
  needs: those after `tensor-to-kernel` for calls of kernel.defs, after `kernel-to-device` for kernel.defs already
  holding device ops, none for linearized device programs (`-p` replaces it); its kernels then run one by one on the
  backend and the outputs are read back.
- a lone `kernel.def` or `device.program`: its `kernel.param`s are the buffers (by index), the ones it stores to are
  the outputs. It runs as a one-call schedule on buffers of the sizes its index math reaches (`--input` gives
  others).

Inputs: `--input NAME=FILE.npy`, NAME a buffer id / param index or the `%name` the file gives the op; the others are
random from `--seed` (normal floats, small integers). `--var NAME=N` binds a `kernel.var` / `tensor.var`.
`--check` runs the input as written on the reference interpreter and compares each output under the tolerance
table (uopir.backends.tolerance): bit-exact passes; the op class of the output's graph (exact / transcendental /
accumulate / composite) decides how many ulps a float may differ by (libm's exp2/log2/sin differ from numpy's in
the last bits; a backend may reorder a float sum) and such a pass is reported as "within tolerance", unless
`--exact`; anything else is a mismatch: exit 1.

`--backend=all` (implies --check): the same inputs on every backend of the registry; one line per backend: `ok
(bit-exact)`, `ok (within tolerance: OUTPUT max error E = U ulp, CLASS)`, `mismatch: OUTPUT: ...` with the max
error and where, `error: ...` when the backend fails on the program, or `unavailable (why)`; exit 1 on any
mismatch or error. Each backend lowers with its own pipeline (so no -p), and there is no single output (no -o).

Errors follow uop-opt: located diagnostics `file:line:col: error: ...` with the source line and a caret, other
errors `uop-run: error: ...`; exit 1, never a Python traceback (a bug in uopir is an "internal error", exit 2).
"""
from __future__ import annotations

import argparse
import io
import re
import sys
import time
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from uopir.backends import tolerance
from uopir.backends.differential import backend_status, check_outputs, verdict_line
from uopir.backends.interface import Backend, Buffer, CompileError, Program
from uopir.backends.params import param_sizes, written_params
from uopir.backends.python.interpreter import evaluate
from uopir.backends.python.magnitude import reorder_magnitudes
from uopir.backends.realize import debug_level, debug_print, kernel_ir_printer, launch_line, print_kernel_ir
from uopir.backends.registry import BACKENDS, get_backend
from uopir.dialects import core
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects import tensor as T
from uopir.dialects.semantics import bf16_round, cast_array, np_dtype
from uopir.ir.diagnostics import IRError, check_buffer_size, diag_at, get_loc, located, source_line
from uopir.ir.dtype import DType, dtypes
from uopir.ir.parser import parse_with_source_map
from uopir.ir.regions import regions_of
from uopir.ir.uop import UOp
from uopir.ir.verify import verify
from uopir.passes.instruments import standard_instruments
from uopir.passes.manager import PassManager
from uopir.passes.pipeline import parse_pipeline
from uopir.tools.common import (
    UsageError,
    add_plugin_options,
    add_version,
    check_environment,
    check_output_file,
    load_plugins,
)
from uopir.tools.uop_opt import _read_input, escape_controls, format_diagnostic, internal_error

PROG = "uop-run"
_NAME_AT_LINE = re.compile(r"\s*(%[A-Za-z0-9_.$-]+)\s*=")


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit 2
        raise UsageError(message)


def _seed(text: str) -> int:
    """A --seed value: an integer >= 0 (numpy's generators take no negative seed)."""
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def build_arg_parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog=PROG, description="Run a .uop program (tensor, kernel or device level) on a backend.")
    add_version(p)
    p.add_argument("file", nargs="?", default="-", metavar="FILE", help="input .uop file, or - for stdin (default)")
    add_plugin_options(p)
    p.add_argument("--backend", default="python", metavar="NAME",
                   help=f"the backend that runs it: {', '.join(BACKENDS)}, or all: every backend this machine can run, "
                        f"each checked against the reference interpreter, one line each (implies --check; "
                        f"default: python)")
    p.add_argument("-p", "--pipeline", default=None, metavar="PIPELINE",
                   help="lower with this pipeline instead of the backend's (for the stage of the input)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                   help="the contents of a buffer (id, param index or %%name) from a .npy file (repeatable)")
    p.add_argument("--var", action="append", default=[], metavar="NAME=N", help="the value of a variable")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter; exit 1 on mismatch")
    p.add_argument("--exact", action="store_true", help="with --check: require bit-exact results")
    p.add_argument("-o", "--output", default=None, metavar="OUT",
                   help="write the outputs to OUT: .npz (one array per output) or .npy (a single output)")
    p.add_argument("--no-verify", action="store_true", help="do not verify the input")
    return p


# ---- what the program reads and writes -----------------------------------------------------------------------------
@dataclass
class Slot:
    """One buffer of the program: its key (buffer id or param index), %name, dtype, shape (None: to infer)."""
    key: int
    name: str | None
    dtype: DType
    shape: tuple[int, ...]
    op: UOp

    @property
    def label(self) -> str:
        return self.name or f"buffer{self.key}"


def _op_name(u: UOp) -> str | None:
    """The %name the input file gives u (from the line it was parsed from)."""
    loc = get_loc(u)
    if loc is None:
        return None
    line = source_line(loc)
    m = _NAME_AT_LINE.match(line or "")
    return m.group(1) if m else None


@dataclass
class Prepared:
    graph: UOp  # a tensor-level graph (a sink) whose tensor.buffer ops are the inputs
    slots: list[Slot]  # its input buffers
    outputs: list[tuple[str, UOp]]  # (label, op) of each output: the sink's operands
    stage: str  # "tensor" (no calls yet), "kernel" (kernel.defs), "lowered" (kernel.defs holding device ops after
    # kernel-to-device) or "device" (linearized device.programs)


def _unwrap(root: UOp) -> UOp:
    if root.op is core.SINK and len(root.src) == 1 and root.src[0].op in (K.DEF, D.PROGRAM):
        return root.src[0]
    return root


def prepare(root: UOp, device: str, given_sizes: dict[int, int]) -> Prepared:
    """Turn any stage into a graph of tensor.buffers, calls and outputs."""
    body = _unwrap(root)
    if body.op in (K.DEF, D.PROGRAM):
        return _wrap_kernel(body, device, given_sizes)
    if body.op is not core.SINK:
        body = UOp.sink(body)
    slots, seen = [], set()
    kinds = set()
    for u in body.toposort():
        if u.op is T.BUFFER and (a := u.attrs).id not in seen:
            seen.add(a.id)
            slots.append(Slot(a.id, _op_name(u), u.dtype, tuple(a.shape), u))
        for r in regions_of(u):
            kinds.add(_region_stage(r))
    outputs = []
    for i, s in enumerate(body.src):
        if s.dtype.kind == "void" or s.shape is None and s.op is not core.CONST:
            continue
        outputs.append((_op_name(s) or f"result{i}", s))
    if not outputs:
        raise IRError(diagnostics=[diag_at(body, "the program has no output: its core.sink has no tensor value")])
    stage = "tensor" if not kinds else min(kinds, key=_STAGES.index)
    return Prepared(body, slots, outputs, stage)


_STAGES = ("tensor", "kernel", "lowered", "device")


def _region_stage(r: UOp) -> str:
    if r.op is D.PROGRAM:
        return "device"
    return "lowered" if any(u.op.dialect == "device" for u in r.toposort()) else "kernel"


def _wrap_kernel(body: UOp, device: str, given_sizes: dict[int, int]) -> Prepared:
    """A one-call schedule running `body` (a kernel.def or device.program) on one buffer per param."""
    params: dict[int, UOp] = {}
    for u in body.toposort():
        if u.op is K.PARAM:
            params.setdefault(u.arg, u)
    sizes = param_sizes(body)
    stored = written_params(body)
    slots, bufs = [], []
    for i in range(max(params) + 1 if params else 0):
        p = params.get(i)
        d = p.dtype.base if p is not None else None
        if i in given_sizes:
            n = given_sizes[i]
        elif p is None:
            n = 1
        else:
            n, at = sizes.get(i, (1, p))
            if n is None:
                raise IRError(diagnostics=[diag_at(at, f"cannot tell how many elements buffer {i} (kernel.param "
                                                     f"{i}) needs: give it with --input {i}=FILE.npy")])
        dt = d if d is not None else dtypes.uint8
        buf = UOp(T.BUFFER, dt, (), (i, device, (max(n, 0),)))
        bufs.append(buf)
        slots.append(Slot(i, _op_name(p) if p is not None else None, dt, (max(n, 0),), buf))
    # each kernel.var of the body gets its value from a tensor.var operand of the same name (bound by --var at run time)
    kvars = sorted({u.arg for u in body.toposort() if u.op.name == "kernel.var"})
    tvars = tuple(UOp(T.VAR, dtypes.index, (), a) for a in kvars)
    call = UOp(T.CALL, dtypes.void, (*bufs, *tvars), (body, body.arg if isinstance(body.arg, str) else "kernel"))
    outputs = [(slots[i].name or f"param{i}", UOp(T.AFTER, bufs[i].dtype, (bufs[i], call))) for i in sorted(stored)]
    if not outputs:
        raise IRError(diagnostics=[diag_at(body, f"{body.op.name} stores to no buffer: nothing to show")])
    return Prepared(UOp.sink(*(o for _, o in outputs)), slots, outputs, _region_stage(body))


# ---- inputs --------------------------------------------------------------------------------------------------------
def _parse_pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for it in items:
        name, eq, val = it.partition("=")
        if not eq or not name.strip() or not val:
            raise UsageError(f"--{what} {it!r}: expected NAME=VALUE")
        if any(n == name.strip() for n, _ in out):
            raise UsageError(f"--{what} {name.strip()}: given twice")
        out.append((name.strip(), val))
    return out


def _find_slot(slots: list[Slot], name: str, flag: str) -> Slot:
    for s in slots:
        if (name.startswith("%") and s.name == name) or (name.isdigit() and s.key == int(name)):
            return s
    known = ", ".join(f"{s.key}" + (f" ({s.name})" if s.name else "") for s in slots) or "none"
    raise UsageError(f"{flag} {name}: the program has no such buffer (buffers: {known})")


# what an array of a numpy dtype kind holds, for the error of an --input that holds no numbers
_NOT_NUMBERS = {"U": "text", "S": "byte strings", "c": "complex numbers", "M": "dates", "m": "time spans",
                "O": "Python objects"}


def _load_npy(path: str, name: str, raw_bytes: bool = False) -> np.ndarray:
    """The array of `--input NAME=PATH`: a UsageError naming both for an unreadable file or one that holds no
    numbers (bool, integers, floats; `raw_bytes`: also raw bytes, np.save's form of an ONNX low-precision array)."""
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"cannot open '{path}': no such file") from None
    except (OSError, ValueError, EOFError) as e:
        raise UsageError(f"cannot read '{path}' as a .npy array: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise UsageError(f"'{path}' holds several arrays (.npz); give one .npy file per buffer")
    d = arr.dtype
    if d.kind in "biuf" or (raw_bytes and d.kind == "V" and d.fields is None):
        return arr
    what = _NOT_NUMBERS.get(d.kind) or (f"records with fields {', '.join(d.names)}" if d.names else "raw bytes")
    raise UsageError(f"--input {name}: '{path}' holds {what} (numpy dtype {d}); uop-run takes arrays of bool, integer "
                     "or float values")


def _fit(arr: np.ndarray, slot: Slot, path: str) -> np.ndarray:
    """`arr` as the slot's carrier dtype and shape; a conversion must keep every value."""
    want = np_dtype(slot.dtype)
    if arr.dtype != want:
        with np.errstate(all="ignore"):
            conv = arr.astype(want)
            same = conv.astype(arr.dtype) == arr
            if arr.dtype.kind in "fc":
                same |= np.isnan(arr) & np.isnan(conv.astype(np.float64))
        if arr.dtype.kind not in "biuf" or not np.all(same):
            raise UsageError(f"--input {slot.label}: '{path}' holds {arr.dtype} values that {slot.dtype.name} "
                             f"(numpy {want}) cannot hold exactly")
        arr = conv
    if slot.dtype is dtypes.bfloat16 and not np.array_equal(bf16_round(arr).view(np.uint32), arr.view(np.uint32)):
        raise UsageError(f"--input {slot.label}: '{path}' holds float32 values that bf16 cannot hold exactly")
    if slot.shape is not None and arr.shape != slot.shape:
        if arr.size != int(np.prod(slot.shape)):
            raise UsageError(f"--input {slot.label}: '{path}' has shape {list(arr.shape)}, the buffer is "
                             f"{list(slot.shape)}")
        arr = arr.reshape(slot.shape)
    return np.ascontiguousarray(arr)


def random_array(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Test data: normal floats (rounded to the dtype), small integers, fair bools."""
    check_buffer_size(tuple(shape), 8, f"a random {dtype.name} input")  # drawn as float64/int64 first
    if dtype is dtypes.bool:
        return rng.random(shape) < 0.5
    if dtype.is_float:
        return np.ascontiguousarray(cast_array(rng.standard_normal(shape), dtypes.float64, dtype))
    lo = 0 if dtype.kind == "uint" else -8
    return rng.integers(lo, 9, size=shape).astype(np_dtype(dtype))


def _var_names(graph: UOp) -> set[str]:
    names, stack, seen = set(), [graph], set()
    while stack:
        for u in stack.pop().toposort():
            if u in seen:
                continue
            seen.add(u)
            if u.op in (K.VAR, T.VAR):
                names.add(u.attrs.name)
            elif u.op is T.BIND and (var := u.operands.var).op is T.VAR:
                names.discard(var.attrs.name)
            stack.extend(regions_of(u))
    return names


# ---- running -------------------------------------------------------------------------------------------------------
def _stage_pipeline(backend: Backend, stage: str) -> str:
    """The part of the backend's pipeline still to run on a graph at `stage`."""
    if stage == "tensor" or not backend.pipeline:
        return backend.pipeline
    if stage == "device":
        return ""
    steps = parse_pipeline(backend.pipeline)
    names = [s.name for s in steps]
    done = "tensor-to-kernel" if stage == "kernel" else "kernel-to-device"
    if done not in names:
        return ""
    return ",".join(s.text() for s in steps[names.index(done) + 1:])


def _check_params(call: UOp, args: list[UOp]) -> None:
    """A located error when the kernel's params do not match the call's buffers (a compiled runtime would only say
    'takes N buffers, got M', or read a buffer as another dtype); the interpreter checks the same as it runs."""
    for x in call.attrs.kernel.toposort():
        if x.op is K.PARAM:
            if not 0 <= x.arg < len(args):
                raise IRError(diagnostics=[diag_at(x, f"the kernel reads kernel.param {{idx = {x.arg}}}, but the "
                                                         f"call passes {len(args)} buffer(s)")])
            if x.dtype.kind == "ptr" and x.dtype.base is not args[x.arg].dtype:
                raise IRError(diagnostics=[diag_at(x, f"kernel.param {{idx = {x.arg}}} is {x.dtype}, but the "
                                                         f"call's buffer {x.arg} holds {args[x.arg].dtype}")])


def run_schedule(backend: Backend, lowered: UOp, arrays: dict[int, np.ndarray],
                 var_vals: dict[str, int]) -> list[np.ndarray]:
    """Run the tensor.calls of a lowered graph kernel by kernel on `backend`, then read its outputs (the sink's
    operands: tensor.afters of buffers, views of them, consts) with the interpreter."""
    order = lowered.toposort()
    bufs: dict[int, Buffer] = {}
    for u in order:
        if u.op is T.BUFFER and (a := u.attrs).id not in bufs:
            bid, shape = a.id, tuple(a.shape)
            if bid in arrays:
                bufs[bid] = backend.allocator.from_numpy(arrays[bid].copy(), u.dtype)
            else:
                bufs[bid] = backend.allocator.from_numpy(np.zeros(shape, np_dtype(u.dtype)), u.dtype)
        elif u.op is T.BIND and (var := u.operands.var).op is T.VAR:
            var_vals.setdefault(var.attrs.name, int(u.operands.value.arg))
    calls = [u for u in order if u.op is T.CALL]
    compiled: dict[UOp, Program] = {}
    for u in calls:  # every kernel first: a backend may compile them in parallel
        a = u.attrs
        if a.kernel not in compiled:
            if a.kernel.op is K.DEF and debug_level() >= 5:  # run as kernel IR (python); else kernel_ir_printer
                print_kernel_ir(a.kernel, a.name)
            compiled[a.kernel] = backend.compile(a.kernel, a.name)
    timed = debug_level() >= 2
    for n, u in enumerate(calls, 1):
        args = [x for x in u.src if x.op is T.BUFFER]
        _check_params(u, args)
        prog, bargs = compiled[u.attrs.kernel], [bufs[x.attrs.id] for x in args]
        if timed:
            backend.runtime.ready(prog)
        t0 = time.perf_counter()
        backend.runtime.launch(prog, bargs, var_vals=var_vals)
        if timed:
            backend.runtime.synchronize()
            debug_print(launch_line(backend.device, n, u.attrs.name, prog, bargs, var_vals, time.perf_counter() - t0))
    backend.runtime.synchronize()
    # the calls have run: read the outputs from the buffers as they are now
    done = {u: u.operands.buffer for u in order if u.op is T.AFTER}
    results = lowered.substitute(done) if done else lowered
    host = {bid: b.numpy() for bid, b in bufs.items()}
    out = evaluate(results if results.op is core.SINK else UOp.sink(results), host, var_vals)
    return [np.asarray(x) for x in out]


def reference(prep: Prepared, arrays: dict[int, np.ndarray], var_vals: dict[str, int]) -> list[np.ndarray]:
    """The outputs on the reference interpreter, from the input as written (the interpreter runs kernel.defs and
    linearized programs; a kernel between kernel-to-device and device-linearize is linearized for it first)."""
    graph = PassManager.parse("device-linearize").run(prep.graph) if prep.stage == "lowered" else prep.graph
    out = evaluate(graph, {k: v.copy() for k, v in arrays.items()}, dict(var_vals))
    return [np.asarray(x) for x in out]


def reference_magnitudes(prep: Prepared, arrays: dict[int, np.ndarray], var_vals: dict[str, int],
                         classes: list[str]) -> list:
    """Each output's reorder magnitude (uopir.backends.python.magnitude: what reordering its float sums may move it
    by), for a tensor-level input holding a float sum; None for an output of another stage or of an op the
    magnitudes do not cover (evaluated only where a float sum makes it count: it runs the graph once more)."""
    sums = prep.stage == "tensor" and any(c in ("accumulate", "composite") for c in classes)
    mags = reorder_magnitudes(prep.graph, arrays, dict(var_vals)) if sums else None
    return list(mags) if mags is not None else [None] * len(prep.outputs)


# ---- reporting -----------------------------------------------------------------------------------------------------
def _type_text(arr: np.ndarray, dtype: DType | str) -> str:
    """tensor<SHAPExDTYPE> of an output (a str dtype: an ONNX type with no uopir dtype, float8e4m3fn...)."""
    shape = "x".join(str(d) for d in arr.shape)
    return f"tensor<{shape + 'x' if shape else ''}{dtype if isinstance(dtype, str) else dtype.name}>"


def summary(arr: np.ndarray) -> str:
    """min/max/mean (and NaN/inf counts) and the first few values."""
    flat = arr.reshape(-1)
    parts = []
    if flat.size == 0:
        return "(empty)"
    if arr.dtype == np.bool_:
        parts.append(f"true {int(flat.sum())}/{flat.size}")
    elif arr.dtype.kind == "f":
        fin = flat[np.isfinite(flat)]
        if fin.size:
            parts.append(f"min {_num(fin.min())}  max {_num(fin.max())}  mean {_num(fin.astype(np.float64).mean())}")
        nan, inf = int(np.isnan(flat).sum()), int(np.isinf(flat).sum())
        if nan:
            parts.append(f"nan {nan}")
        if inf:
            parts.append(f"inf {inf}")
    else:
        parts.append(f"min {flat.min()}  max {flat.max()}  mean {_num(flat.astype(np.float64).mean())}")
    head = ", ".join(_num(x) for x in flat[:6]) + (", ..." if flat.size > 6 else "")
    return "  ".join(parts) + f"  [{head}]"


def _num(x: object) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.6g}"
    return str(int(x))


def compare(got: np.ndarray, want: np.ndarray, dtype: DType, exact: bool, cls: str = "exact",
            magnitude: np.ndarray | None = None) -> tuple[bool, str]:
    """(ok, what): `got` against the reference under the tolerance of op class `cls` (uopir.backends.tolerance;
    `magnitude`: the reorder magnitude of each element): bit-exact, within tolerance (floats of a
    transcendental/accumulating program), or the worst mismatch."""
    r = tolerance.compare(got, want, dtype, cls, exact=exact, magnitude=magnitude)
    return r.ok, r.message


def _write_output(path: str, outs: list[tuple[str, np.ndarray]]) -> None:
    try:
        if path.endswith(".npy"):
            if len(outs) != 1:
                raise UsageError(f"-o {path}: a .npy file holds one array, the program has {len(outs)} outputs "
                                 f"(write a .npz)")
            np.save(path, outs[0][1])
        else:
            np.savez(path, **{name.lstrip("%"): arr for name, arr in outs})
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}") from None


# ---- main ------------------------------------------------------------------------------------------------------------
def _main(argv: list[str], out: TextIO, err: TextIO) -> int:
    args = build_arg_parser().parse_args(argv)
    check_environment()
    listing = load_plugins(args)
    if listing is not None:
        out.write(listing)
        return 0

    every = args.backend.strip().lower() == "all"
    if every:
        if args.output is not None:
            raise UsageError("-o writes one backend's outputs: name the backend (--backend=NAME), not all")
        if args.pipeline is not None:
            raise UsageError("-p replaces one backend's pipeline: with --backend=all each backend lowers with its own")
        backend = get_backend("python")  # prepares the inputs; every backend runs them below
    else:
        try:
            backend = get_backend(args.backend)
        except ValueError as e:
            raise UsageError(f"{e} (or all)") from None
        if not backend.available:
            why = getattr(backend, "reason", "it is not available on this machine")
            raise UsageError(f"--backend={args.backend}: {why}")
        if args.exact and not args.check:
            raise UsageError("--exact only applies with --check")
    if args.output is not None and not args.output.endswith((".npz", ".npy")):
        raise UsageError(f"-o {args.output}: the output file must end in .npz (every output) or .npy (a single one)")
    if args.output is not None:
        check_output_file(args.output, "-o")
    inputs = _parse_pairs(args.input, "input")
    if args.file.lower().endswith(".onnx"):
        return _run_onnx(args, backend, inputs, out)
    var_vals = {}
    for name, val in _parse_pairs(args.var, "var"):
        try:
            var_vals[name] = int(val, 0)
        except ValueError:
            raise UsageError(f"--var {name}={val}: the value must be an integer") from None
    text, filename = _read_input(args.file)  # uop-opt's reading rules (UTF-8, '-' for stdin)
    root, smap = parse_with_source_map(text, filename)
    with located(smap):  # every diagnostic points into this file, also when another parse made the same graph
        return _run_program(args, root, backend, every, inputs, var_vals, out, err)


def _run_program(args: argparse.Namespace, root: UOp, backend: Backend, every: bool, inputs: list[tuple[str, str]],
                 var_vals: dict[str, int], out: TextIO, err: TextIO) -> int:
    if not args.no_verify:
        verify(root)
    loaded = {}
    for name, path in inputs:
        loaded[name] = (_load_npy(path, name), path)
    # sizes of kernel params given by --input (a kernel's buffers have no declared shape)
    sizes = {int(n): a.size for n, (a, _) in loaded.items() if n.isdigit()}
    body = _unwrap(root)
    if body.op.name in ("kernel.def", "device.program"):

        for u in body.toposort():
            name = _op_name(u) if u.op is K.PARAM else None
            if name is not None and name in loaded:
                sizes[u.arg] = loaded[name][0].size
    prep = prepare(root, backend.device, sizes)
    rng = np.random.default_rng(args.seed)
    arrays: dict[int, np.ndarray] = {}
    for name, (arr, path) in loaded.items():
        slot = _find_slot(prep.slots, name, "--input")
        if slot.key in arrays:
            raise UsageError(f"--input {name}: buffer {slot.label} is given twice")
        arrays[slot.key] = _fit(arr, slot, path)
    for s in prep.slots:
        if s.key not in arrays:
            arrays[s.key] = random_array(s.dtype, s.shape, rng)
    free = _var_names(prep.graph)
    missing = sorted(free - set(var_vals))
    if missing:
        raise UsageError(f"the program has variable(s) {', '.join(missing)}: give each a value with --var NAME=N")
    unknown = sorted(set(var_vals) - free)
    if unknown:
        raise UsageError(f"--var {unknown[0]}: the program has no such variable (its variables: "
                         f"{', '.join(sorted(free)) or 'none'})")
    classes = [tolerance.op_class(u) for _, u in prep.outputs]
    if every:
        return _run_every(root, sizes, prep, arrays, var_vals, classes, args.exact, out, err)
    pipeline = args.pipeline if args.pipeline is not None else _stage_pipeline(backend, prep.stage)
    printer = kernel_ir_printer()
    lowered = PassManager.parse(pipeline).run(prep.graph, instruments=standard_instruments() + [printer] if printer
                                              else None) if pipeline else prep.graph
    got = run_schedule(backend, lowered, arrays, dict(var_vals))
    results = [(label, arr, u.dtype) for (label, u), arr in zip(prep.outputs, got, strict=True)]
    lines = [f"{escape_controls(label)}: {_type_text(arr, d)}  {summary(arr)}" for label, arr, d in results]
    ok = True
    if args.check:
        want = reference(prep, arrays, var_vals)
        mags = reference_magnitudes(prep, arrays, var_vals, classes)
        for (label, arr, d), ref, cls, mag in zip(results, want, classes, mags, strict=True):
            good, what = compare(arr, ref, d, args.exact, cls, mag)
            ok &= good
            lines.append(f"check {escape_controls(label)}: {what}")
    out.write("\n".join(lines) + "\n")
    if args.output is not None:
        _write_output(args.output, [(label, arr) for label, arr, _ in results])
    if not ok:
        err.write(f"{PROG}: error: the {backend.device} results differ from the reference interpreter\n")
    return 0 if ok else 1


def _run_every(root: UOp, sizes: dict[int, int], prep0: Prepared, arrays: dict[int, np.ndarray],
               var_vals: dict[str, int], classes: list[str], exact: bool, out: TextIO, err: TextIO) -> int:
    """--backend=all: the program on every backend with the same inputs, each compared with the reference
    interpreter under the tolerance table; one line per backend. 1 if any backend differs or fails."""
    want = reference(prep0, arrays, var_vals)
    mags = reference_magnitudes(prep0, arrays, var_vals, classes)
    labels = [label for label, _ in prep0.outputs]
    dts = [u.dtype for _, u in prep0.outputs]
    failed = []
    for st in backend_status(BACKENDS):  # every registered backend, mlir (not a Tensor device) included
        if not st.available:
            out.write(f"{st.name}: unavailable ({escape_controls(st.reason or '')})\n")
            continue
        backend = get_backend(st.name)
        try:
            prep = prepare(root, backend.device, sizes)
            pipeline = _stage_pipeline(backend, prep.stage)
            lowered = PassManager.parse(pipeline).run(prep.graph) if pipeline else prep.graph
            got = run_schedule(backend, lowered, {k: v.copy() for k, v in arrays.items()}, dict(var_vals))
        except IRError as e:
            failed.append(st.name)
            first = e.diagnostics[0].message if e.diagnostics else str(e)
            out.write(f"{st.name}: error: {escape_controls(first)}\n")
            continue
        except Exception as e:  # noqa: BLE001 - one backend failing is a finding about it, not the end of the run
            failed.append(st.name)
            msg = str(e).strip().splitlines()
            out.write(f"{st.name}: error: {type(e).__name__}: {escape_controls(msg[0] if msg else '')}\n")
            continue
        checks = check_outputs(labels, got, want, dts, classes, exact=exact, magnitudes=mags)
        line = verdict_line(checks)
        if not all(c.result.ok for c in checks):
            failed.append(st.name)
        out.write(f"{st.name}: {escape_controls(line)}\n")
    if failed:
        err.write(f"{PROG}: error: not every backend agrees with the reference interpreter: {', '.join(failed)}\n")
    return 1 if failed else 0


def _run_onnx(args: argparse.Namespace, backend: Backend, inputs: list[tuple[str, str]], out: TextIO) -> int:
    """An ONNX model (uopir.onnx): inputs by graph input name (others random), outputs by name."""
    if args.backend.strip().lower() == "all" or args.check or args.pipeline is not None or args.var:
        raise UsageError("with an .onnx model: --backend=NAME, --input, --seed and -o only")
    try:
        from uopir.onnx.cli import load, load_feeds
        from uopir.onnx.registry import OnnxImportError
    except ImportError as e:
        raise UsageError(f"cannot run '{args.file}': {e}") from None
    arrays = [(n, _load_npy(p, n, raw_bytes=True)) for n, p in inputs]
    try:
        model = load(args.file, backend.device)
        try:
            feeds = load_feeds(model, arrays, args.seed)
        except OnnxImportError as e:  # about one input: say which file gave it
            given = [f" (--input {n}={p})" for n, p in inputs if str(e).startswith(f"input '{n}'")]
            raise OnnxImportError(f"{e}{given[0] if given else ''}") from None
        outs = model(feeds)
    except FileNotFoundError:
        raise UsageError(f"cannot open '{args.file}': no such file") from None
    except (OSError, KeyError, OnnxImportError) as e:
        raise UsageError(f"{args.file}: {e.args[0] if isinstance(e, KeyError) else e}") from None
    lines, saved = [], []
    flat: list[tuple[str, object]] = []
    for name, t in outs.items():  # a sequence output: one line per element (name[i]); an empty optional: a line
        flat += ([(f"{name}[{i}]", x) for i, x in enumerate(t)] or [(name, "empty sequence")] if isinstance(t, list)
                 else [(name, "empty optional" if t is None else t)])
    for name, t in flat:
        if isinstance(t, str):
            lines.append(f"{escape_controls(name)}: {t}")
            continue
        a, lt = t.numpy(), model.lowp_outputs.get(name)
        # a float8/float4/int4/int2 output: printed as its ONNX type (the values are its storage's, exact); np.save
        # cannot keep an ml_dtypes dtype (np.load gives raw bytes, |V1), so -o holds the storage values
        line = f"{escape_controls(name)}: {_type_text(a, lt.name if lt else t.dtype)}  {summary(a)}"
        if lt is not None and args.output is not None:
            line += f"  (-o: saved as its {t.dtype.name} storage values, which are {lt.name} values)"
        lines.append(line)
        saved.append((name, a))
    out.write("\n".join(lines) + "\n")
    if args.output is not None:
        _write_output(args.output, saved)
    return 0


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The uop-run program; returns the exit code (0 ok, 1 bad input or a failed check, 2 internal error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if err is None:
        err = io.StringIO()
    try:
        return _main(argv, out, err)
    except UsageError as e:
        err.write(f"{PROG}: error: {escape_controls(str(e))}\n")
        return 1
    except IRError as e:
        err.write("\n".join(format_diagnostic(d) for d in e.diagnostics) + "\n")
        return 1
    except MemoryError as e:  # BufferTooLarge: a buffer beyond this machine's memory, refused before allocating
        err.write(f"{PROG}: error: {escape_controls(str(e) or 'out of memory')}\n")
        return 1
    except KeyboardInterrupt:
        err.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:
        return 1
    except SystemExit as e:  # argparse --help
        return int(e.code or 0) if isinstance(e.code, int) else 0
    except Exception as e:  # noqa: BLE001 - never a traceback for the user
        if isinstance(e, CompileError):
            err.write(f"{PROG}: error: {escape_controls(str(e))}\n")
            return 1
        return internal_error(PROG, e, err)


if __name__ == "__main__":
    sys.exit(main())
