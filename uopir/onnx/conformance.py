"""ONNX's backend node tests, generated from the onnx package's own case generators and run through uopir.onnx.

The onnx wheel ships the generators (`onnx.backend.test.case.node`), not the data: `generate` writes each case as
`onnx backend-test-tools generate-data` would (`<name>/model.onnx`, `test_data_set_0/input_j.pb`, `output_j.pb`) into
a cache folder keyed by the onnx version, once. `run_case` runs one case and compares with the expected outputs as
onnx's backend runner does (same dtype, then `assert_allclose(rtol=1e-3, atol=1e-7)` — ONNX's defaults, NaN equal to
NaN; bfloat16 within two of its ulps; sequences element by element; random operators by dtype, shape and support,
`RANDOM_OPS`), and classifies it: passed, failed (wrong values, or any error other than the importer's clear
rejection) or skipped (the importer rejected the model with OnnxImportError: an unsupported operator, dtype or
attribute).

`python -m uopir.onnx.conformance [--device c] [--jobs N] [--table FILE]` runs the whole suite and prints the summary
(a progress bar on stderr while it runs: plain lines when stderr is not a terminal).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uopir.search.progress import progress, progress_setting

RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test.case.node.expect's defaults for every node test
INDEX = "index.json"


def default_cache_root() -> Path:
    from uopir.backends.cache import cache_dir
    return cache_dir() / "onnx-node-tests"


DATA_FORMAT = 2  # 2: sequence and optional values written as SequenceProto / OptionalProto (1 left them empty)


def data_dir(root: Path | None = None) -> Path:
    import onnx
    return (root or default_cache_root()) / f"onnx-{onnx.__version__}-numpy-{np.__version__}-v{DATA_FORMAT}"


def _write_value(path: Path, value: Any, vi: Any) -> str:
    """Write one input/output as `onnx backend-test-tools generate-data` does; returns its kind ('tensor', or the
    non-tensor type the case uses)."""
    from onnx import TensorProto, numpy_helper
    kind = vi.type.WhichOneof("value")
    if kind == "sequence_type":
        path.write_bytes(numpy_helper.from_list(value, vi.name).SerializeToString())
        return kind
    if kind == "optional_type":
        path.write_bytes(numpy_helper.from_optional(value, vi.name).SerializeToString())
        return kind
    if kind != "tensor_type":
        path.write_bytes(b"")
        return kind or "unknown"
    tp = value if isinstance(value, TensorProto) else numpy_helper.from_array(np.asarray(value), vi.name)
    path.write_bytes(tp.SerializeToString())
    return "tensor"


def generate(root: Path | None = None) -> Path:
    """The data folder, generated on first use (the generators take ~15 s)."""
    out = data_dir(root)
    if (out / INDEX).exists():
        return out
    import warnings

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".gen-", dir=out.parent))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import onnx.backend.test.case.node as node_cases
        cases = node_cases.collect_testcases()
    index: dict[str, dict[str, Any]] = {}
    op_of: dict[str, str] = {}
    for case in cases:
        if case.model is not None and len(case.model.graph.node) == 1:
            op_of[case.name] = case.model.graph.node[0].op_type
    for case in cases:
        assert case.model is not None and case.data_sets
        d = tmp / case.name
        (d / "test_data_set_0").mkdir(parents=True)
        (d / "model.onnx").write_bytes(case.model.SerializeToString())
        kinds = []
        g = case.model.graph
        inputs, outputs = case.data_sets[0]
        for j, v in enumerate(inputs):
            kinds.append(_write_value(d / "test_data_set_0" / f"input_{j}.pb", v, g.input[j]))
        for j, v in enumerate(outputs):
            kinds.append(_write_value(d / "test_data_set_0" / f"output_{j}.pb", v, g.output[j]))
        base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
        op = op_of.get(base) or (g.node[0].op_type if len(g.node) else "?")
        index[case.name] = {"op": op, "expanded": base != case.name, "n_in": len(inputs), "n_out": len(outputs),
                            "rtol": case.rtol, "atol": case.atol, "non_tensor": sorted(set(kinds) - {"tensor"})}
    (tmp / INDEX).write_text(json.dumps(index, sort_keys=True))
    try:
        tmp.rename(out)
    except OSError:  # another process generated it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def load_index(folder: Path) -> dict[str, dict[str, Any]]:
    return json.loads((folder / INDEX).read_text())


@dataclass
class Result:
    name: str
    op: str
    status: str  # passed | failed | skipped
    reason: str = ""
    seconds: float = 0.0


def skip_reason(msg: str) -> str:
    """A short, groupable reason of an OnnxImportError message (without the node's name)."""
    m = re.match(r"node '.*?' \((.*?), opset \d+\): (.*)", msg, re.S)
    op, rest = (m.group(1), m.group(2)) if m else ("", msg)
    rest = rest.split("\n")[0]
    if rest.startswith("unsupported operator"):
        return f"unsupported operator {op}"
    d = re.search(r"unsupported (dtype|type):? (\w[\w ]*)", rest)
    if d:
        return f"unsupported {d.group(1)} {d.group(2).strip()}"
    return re.sub(r"'[^']*'", "'…'", rest)[:80]


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _load_tensor(path: Path) -> np.ndarray:
    from onnx import TensorProto, numpy_helper
    tp = TensorProto()
    tp.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tp)


def _load_value(path: Path, vi: Any) -> Any:
    """A tensor as numpy, a sequence as a list of arrays, an optional as None or its content."""
    import onnx
    from onnx import numpy_helper
    kind = vi.type.WhichOneof("value")
    if kind == "sequence_type":
        sp = onnx.SequenceProto()
        sp.ParseFromString(path.read_bytes())
        return numpy_helper.to_list(sp)
    if kind == "optional_type":
        op = onnx.OptionalProto()
        op.ParseFromString(path.read_bytes())
        return numpy_helper.to_optional(op)
    return _load_tensor(path)


# random operators: the node tests' expected values come from numpy's global generator (not the node's seed), so no
# implementation reproduces them; their outputs are judged by dtype, shape and support only (as onnx says of them:
# "non-deterministic, may not produce the same values in different implementations even if a seed is specified")
RANDOM_OPS = frozenset({"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
                        "RandomUniformLike"})


def _compare(nm: str, got: Any, want: Any, meta: dict[str, Any], problems: list[str]) -> None:
    """Append what differs between output `nm` (numpy, bfloat16 and the low-precision types as their ml_dtypes dtype,
    lists for sequences, None for an empty optional) and the expected value, as onnx's backend runner judges it."""
    from uopir.onnx.lowp import lowp_of_np
    if isinstance(want, list) or want is None:
        if type(got) is not type(want) or (want is not None and len(got) != len(want)):
            desc = (lambda v: "nothing" if v is None else f"a sequence of {len(v)}" if isinstance(v, list)
                    else "a tensor")
            problems.append(f"output {nm}: {desc(got)}, expected {desc(want)}")
            return
        for j, (g, w) in enumerate(zip(got or [], want or [], strict=True)):
            _compare(f"{nm}[{j}]", g, w, meta, problems)
        return
    if not isinstance(got, np.ndarray):
        problems.append(f"output {nm}: {'nothing' if got is None else 'a sequence'}, expected a tensor")
        return
    if got.dtype.name != want.dtype.name:
        problems.append(f"output {nm}: dtype {got.dtype.name}, expected {want.dtype.name}")
        return
    rtol, atol = meta.get("rtol", RTOL), meta.get("atol", ATOL)
    if want.dtype.name == "bfloat16":  # onnx's runner: at least two bfloat16 ulps
        got, want, rtol = got.astype(np.float32), want.astype(np.float32), max(rtol, 2**-6)
    elif lowp_of_np(want.dtype) is not None:  # compared exactly, as float32 values (NaN equal to NaN)
        got, want, rtol, atol = got.astype(np.float32), want.astype(np.float32), 0.0, 0.0
    if got.shape != want.shape:
        problems.append(f"output {nm}: shape {got.shape}, expected {want.shape}")
        return
    if meta["op"] in RANDOM_OPS:  # values in the support: Bernoulli's 0/1 (the only random op with node tests)
        if meta["op"] == "Bernoulli" and not np.isin(got, (0, 1)).all():
            problems.append(f"output {nm}: values other than 0 and 1")
        return
    try:
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)
    except AssertionError as e:
        lines = [ln for ln in str(e).strip().split("\n") if ln.strip()]
        problems.append(f"output {nm}: values differ ({'; '.join(lines[1:3])})")


def run_case(folder: Path, name: str, meta: dict[str, Any], device: str | None = None,
             timeout_s: float = 60.0) -> Result:
    """Run one node test; never raises (except KeyboardInterrupt)."""
    import onnx

    from uopir.onnx import OnnxImportError, OnnxOpError, from_onnx
    t0 = time.perf_counter()
    res = Result(name, meta["op"], "failed")
    use_alarm = timeout_s > 0 and hasattr(signal, "SIGALRM") and _main_thread()
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        d = folder / name
        proto = onnx.load(str(d / "model.onnx"))
        model = from_onnx(proto, device=device)  # rejects unsupported ops / types before any input is read
        feeds: dict[str, Any] = {}
        for j in range(meta["n_in"]):
            vi = proto.graph.input[j]
            feeds[vi.name] = _load_value(d / "test_data_set_0" / f"input_{j}.pb", vi)
        outs = model(feeds)
        problems: list[str] = []
        for j, vi in enumerate(proto.graph.output):
            want = _load_value(d / "test_data_set_0" / f"output_{j}.pb", vi)
            # in its ONNX type: bfloat16 / float8 / float4 / int4 / int2 as ml_dtypes arrays, sequences as lists
            _compare(vi.name, model.output_numpy(vi.name, outs[vi.name]), want, meta, problems)
        res.status, res.reason = ("failed", " | ".join(problems)) if problems else ("passed", "")
    except _Timeout:
        res.reason = f"timeout after {timeout_s:.0f} s"
    except OnnxOpError as e:
        res.reason = f"op error: {e}"
    except OnnxImportError as e:
        res.status, res.reason = "skipped", skip_reason(str(e))
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a crash is a failure of this case, reported with its type
        res.reason = f"{type(e).__name__}: {e}"[:300]
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    res.seconds = time.perf_counter() - t0
    return res


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def _worker(args: tuple[str, list[tuple[str, dict[str, Any]]], str | None, float]) -> list[Result]:
    import warnings
    folder, items, device, timeout_s = args
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.seterr(all="ignore")
        return [run_case(Path(folder), n, m, device, timeout_s) for n, m in items]


def run_all(folder: Path, device: str | None = None, jobs: int = 1, timeout_s: float = 60.0,
            names: list[str] | None = None, show_progress: bool = False) -> list[Result]:
    """Run every case (or `names`), in `jobs` worker processes when > 1; `show_progress`: a bar on stderr (plain
    lines on a pipe) counts the cases and their outcomes."""
    index = load_index(folder)
    items = [(n, index[n]) for n in sorted(names if names is not None else index)]
    if jobs <= 1:  # one chunk a case: the bar moves with each
        chunks = [[it] for it in items]
        runs: Iterable[list[Result]] = (_worker((str(folder), c, device, timeout_s)) for c in chunks)
        return _collect(runs, len(items), show_progress)
    import multiprocessing as mp
    chunks = [items[i::jobs * 8] for i in range(jobs * 8)]
    ctx = mp.get_context("spawn")  # fresh interpreters: no state of the caller (pytest) leaks into the workers
    with ctx.Pool(jobs) as pool:
        runs = pool.imap_unordered(_worker, [(str(folder), c, device, timeout_s) for c in chunks])
        return _collect(runs, len(items), show_progress)


def _collect(runs: Iterable[list[Result]], total: int, show_progress: bool) -> list[Result]:
    out: list[Result] = []
    counts: Counter[str] = Counter()
    with progress(total, "onnx node tests", disable=not show_progress) as bar:
        for rs in runs:
            out += rs
            counts.update(r.status for r in rs)
            bar.set_postfix(passed=counts["passed"], failed=counts["failed"], skipped=counts["skipped"])
            bar.update(len(rs))
    return sorted(out, key=lambda r: r.name)


def summary_line(results: list[Result], device: str) -> str:
    c = Counter(r.status for r in results)
    skips = Counter(r.reason for r in results if r.status == "skipped")
    by_kind = Counter(_skip_kind(r.reason) for r in results if r.status == "skipped")
    kinds = ", ".join(f"{k} {v}" for k, v in by_kind.most_common())
    why = f" ({kinds}; {len(skips)} reason{'s' if len(skips) != 1 else ''})" if skips else ""
    return (f"onnx node tests on {device}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped{why} "
            f"of {len(results)}")


def _skip_kind(reason: str) -> str:
    if reason.startswith("unsupported operator"):
        return "unsupported operator"
    if reason.startswith("unsupported dtype"):
        return "unsupported dtype"
    if reason.startswith("unsupported type"):
        return "non-tensor type"
    return "unsupported attribute/input"


def table(results: list[Result], device: str) -> str:
    """A markdown table per operator: passed / failed / skipped, with the failing and skipped reasons."""
    per: dict[str, list[Result]] = {}
    for r in results:
        per.setdefault(r.op, []).append(r)
    lines = [f"# ONNX node tests on device {device}", "", summary_line(results, device), "",
             "| op | tests | passed | failed | skipped | notes |", "|---|---|---|---|---|---|"]
    for op in sorted(per):
        rs = per[op]
        c = Counter(r.status for r in rs)
        notes = sorted({f"{r.name}: {r.reason}"[:160] for r in rs if r.status == "failed"})[:3]
        notes += sorted({r.reason for r in rs if r.status == "skipped"})[:2]
        lines.append(f"| {op} | {len(rs)} | {c['passed']} | {c['failed']} | {c['skipped']} | "
                     f"{'; '.join(n.replace('|', '/') for n in notes)} |")
    lines += ["", "## failures", ""]
    lines += [f"- {r.name} ({r.op}): {r.reason}" for r in results if r.status == "failed"]
    slow = sorted(results, key=lambda r: -r.seconds)[:15]
    lines += ["", "## slowest", ""] + [f"- {r.name}: {r.seconds:.2f} s ({r.status})" for r in slow]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m uopir.onnx.conformance", description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None, help="uopir device (default: $UOPIR_DEVICE or the best available)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per test")
    p.add_argument("--table", default=None, help="write the per-op table (markdown) here")
    p.add_argument("-k", default=None, help="only tests whose name contains this")
    p.add_argument("--cache", default=None, help="the data cache root (default: the uopir cache dir)")
    a = p.parse_args(argv)
    try:
        progress_setting()
    except ValueError as e:
        p.error(str(e))
    from uopir.onnx.importer import default_device
    device = a.device or default_device()
    t0 = time.perf_counter()
    folder = generate(Path(a.cache) if a.cache else None)
    t1 = time.perf_counter()
    names = [n for n in load_index(folder) if a.k is None or a.k in n]
    results = run_all(folder, device, a.jobs, a.timeout, names, show_progress=True)
    t2 = time.perf_counter()
    if a.table:
        Path(a.table).write_text(table(results, device))
    for r in results:
        if r.status == "failed":
            print(f"FAILED {r.name}: {r.reason[:300]}")
    print(f"generation {t1 - t0:.1f} s, run {t2 - t1:.1f} s")
    print(summary_line(results, device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
