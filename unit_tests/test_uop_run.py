"""uop-run: a .uop program at any stage runs on python or c, prints its outputs, writes them, checks them.

Runs the real program in-process (`main(argv, out, err)`) on files written to a temporary folder; the C cases are
skipped when no C compiler is installed.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from uopir.backends.c.compiler import find_cc
from uopir.ir.dtype import dtypes
from uopir.tools.uop_run import compare, main, random_array

needs_cc = pytest.mark.skipif(find_cc() is None, reason="no C compiler ($CC, clang or cc) is installed")

SOFTMAX_ROWS = """
%x = tensor.buffer {id = 0, device = "python"} : tensor<3x5xf32>
%m = tensor.reduce %x {op = max, axes = [1]} : tensor<3x1xf32>
%me = tensor.expand %m {shape = [3, 5]} : tensor<3x5xf32>
%d = core.sub %x, %me : tensor<3x5xf32>
%l2e = core.const 1.4426950408889634 : f32
%dl = core.mul %d, %l2e : tensor<3x5xf32>
%e = core.exp2 %dl : tensor<3x5xf32>
%s = tensor.reduce %e {op = add, axes = [1]} : tensor<3x1xf32>
%se = tensor.expand %s {shape = [3, 5]} : tensor<3x5xf32>
%y = core.fdiv %e, %se : tensor<3x5xf32>
core.sink %y, %m
"""

INT_KERNEL = """
%out = kernel.param {idx = 0} : ptr<i32, global>
%x = kernel.param {idx = 1} : ptr<i32, global>
%c6 = core.const 6 : index
%i = kernel.range %c6 {axis = 0} : index
%c2 = core.const 2 : index
%i2 = core.mul %i, %c2 : index
%c1 = core.const 1 : index
%i21 = core.add %i2, %c1 : index
%pa = kernel.index %x, %i2 : ptr<i32, global>
%pb = kernel.index %x, %i21 : ptr<i32, global>
%a = kernel.load %pa : i32
%b = kernel.load %pb : i32
%q = core.idiv %a, %b : i32
%r = core.mod %a, %b : i32
%s = core.shl %q, %r : i32
%po = kernel.index %out, %i : ptr<i32, global>
%st = kernel.store %po, %s
%e = kernel.end %st, %i
kernel.def %e {name = "divmod"}
"""


def run(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    f = tmp_path / "prog.uop"
    f.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    rc = main([str(f), *args], out, err)
    return rc, out.getvalue(), err.getvalue()


def test_tensor_program_prints_each_output_and_matches_itself_on_python(tmp_path: Path) -> None:
    rc, out, err = run(tmp_path, SOFTMAX_ROWS, "--check")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("%y: tensor<3x5xf32>  min ") and lines[1].startswith("%m: tensor<3x1xf32>  min ")
    assert lines[2:] == ["check %y: bit-exact", "check %m: bit-exact"]


def test_outputs_written_to_npz_are_the_printed_values(tmp_path: Path) -> None:
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = run(tmp_path, SOFTMAX_ROWS, "--input", f"%x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "o.npz"))
    assert rc == 0, err
    z = np.load(tmp_path / "o.npz")
    np.testing.assert_array_equal(z["m"], x.max(axis=1, keepdims=True))
    e = np.exp2((x - x.max(axis=1, keepdims=True)) * np.float32(1.4426950408889634))
    np.testing.assert_allclose(z["y"], e / e.sum(axis=1, keepdims=True), rtol=1e-6)


def test_seed_decides_the_random_inputs(tmp_path: Path) -> None:
    a = run(tmp_path, SOFTMAX_ROWS, "--seed", "1")[1]
    assert a == run(tmp_path, SOFTMAX_ROWS, "--seed", "1")[1]
    assert a != run(tmp_path, SOFTMAX_ROWS, "--seed", "2")[1]


def test_random_inputs_are_exact_values_of_their_dtype() -> None:
    rng = np.random.default_rng(0)
    b = random_array(dtypes.bfloat16, (64,), rng)
    assert b.dtype == np.float32 and np.all(b.view(np.uint32) & 0xFFFF == 0)
    u = random_array(dtypes.uint8, (64,), rng)
    assert u.dtype == np.uint8 and u.max() <= 8
    assert random_array(dtypes.bool, (8,), rng).dtype == np.bool_


def test_kernel_buffers_are_sized_from_their_index_math(tmp_path: Path) -> None:
    x = np.array([7, 2, -7, 2, 7, -2, 5, 0, -8, -1, 3, 40], np.int32)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = run(tmp_path, INT_KERNEL, "--input", f"1={tmp_path / 'x.npy'}", "-o", str(tmp_path / "o.npy"))
    assert rc == 0, err
    assert out.startswith("%out: tensor<6xi32>")
    a, b = x[0::2], x[1::2]
    q = np.array([int(p / d) if d else 0 for p, d in zip(a, b, strict=True)], np.int64)  # C: truncating, x/0 = 0
    r = np.array([p - int(p / d) * d if d else 0 for p, d in zip(a, b, strict=True)], np.int64)
    want = ((q << (r & 31)) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), want)


def test_unbounded_index_is_a_located_error(tmp_path: Path) -> None:
    text = """%out = kernel.param {idx = 0} : ptr<f32, global>
%n = kernel.var {name = "n", min = 0, max = 9223372036854775807} : index
%p = kernel.index %out, %n : ptr<f32, global>
%z = core.const 0.0 : f32
%st = kernel.store %p, %z
kernel.def %st {name = "k"}
"""
    rc, out, err = run(tmp_path, text, "--var", "n=3")
    assert rc == 1 and out == ""
    assert "prog.uop:3:1: error: cannot tell how many elements buffer 0 (kernel.param 0) needs: give it with " \
           "--input 0=FILE.npy" in err
    np.save(tmp_path / "o.npy", np.zeros(5, np.float32))
    rc, out, err = run(tmp_path, text, "--var", "n=3", "--input", f"0={tmp_path / 'o.npy'}")
    assert rc == 0 and out.startswith("%out: tensor<5xf32>  min 0  max 0  mean 0  [0, 0, 0, 0, 0]"), err


def test_compare_decides_exact_close_and_mismatch() -> None:
    """uop-run judges with the tolerance table: bits for the exact class, ulps for the others, bits with --exact."""
    a = np.array([1.0, np.nan, -0.0], np.float32)
    assert compare(a, np.array([1.0, np.nan, -0.0], np.float32), dtypes.float32, False) == (True, "bit-exact")
    near = np.nextafter(a, np.float32(2))
    ok, what = compare(near, a, dtypes.float32, False, "transcendental")
    assert ok and what.startswith("within tolerance (transcendental, 16 ulp): 2 of 3 elements differ")
    ok, what = compare(near, a, dtypes.float32, False, "exact")  # a program without transcendentals or float sums
    assert not ok and what.startswith("MISMATCH (exact, bits required): 2 of 3 elements differ")
    ok, what = compare(near, a, dtypes.float32, True, "composite")
    assert not ok and what.startswith("MISMATCH (composite, bits required): 2 of 3 elements differ")
    ok, what = compare(np.array([0.0, 0.0], np.float32), np.array([0.0, -0.0], np.float32), dtypes.float32, True)
    assert not ok and "at [1]" in what  # -0.0 is not +0.0, bit for bit
    ok, what = compare(np.array([1, 2], np.int32), np.array([1, 3], np.int32), dtypes.int32, False, "composite")
    assert not ok and what == "MISMATCH (composite, integers and bools must be equal): 1 of 2 elements differ; " \
                              "max error 1 at [1]: got 2, the reference has 3"


def test_bad_backend_and_internal_errors_never_print_a_traceback(tmp_path: Path) -> None:
    rc, out, err = run(tmp_path, SOFTMAX_ROWS, "--backend", "nope")
    assert rc == 1 and err.startswith("uop-run: error: unknown backend 'nope'") and "Traceback" not in err
    rc, out, err = run(tmp_path, "core.sink\n")
    assert rc == 1 and "prog.uop:1:1: error: the program has no output" in err


@needs_cc
@pytest.mark.parametrize("text", [SOFTMAX_ROWS, INT_KERNEL], ids=["softmax", "int-kernel"])
def test_c_backend_agrees_with_the_reference(tmp_path: Path, text: str) -> None:
    rc, out, err = run(tmp_path, text, "--backend=c", "--check", "--seed", "11")
    assert rc == 0, err
    checks = [ln for ln in out.splitlines() if ln.startswith("check ")]
    assert checks and all(": bit-exact" in c or ": within tolerance" in c for c in checks)
    if text is INT_KERNEL:
        assert checks == ["check %out: bit-exact"]


@needs_cc
def test_every_stage_of_the_default_pipeline_runs_on_c(tmp_path: Path) -> None:
    """The same program stopped after each pass of default{target=c}, printed and run: all equal to the reference."""
    from uopir.ir.parser import parse_ir
    from uopir.ir.printer import print_ir
    from uopir.passes.manager import PassManager
    from uopir.passes.pipeline import parse_pipeline

    steps = [s.text() for s in parse_pipeline("default{target=c}")]
    x = np.linspace(-3, 3, 15, dtype=np.float32).reshape(3, 5)
    np.save(tmp_path / "x.npy", x)
    outs = []
    for k in range(len(steps) + 1):
        text = print_ir(PassManager.parse(",".join(steps[:k])).run(parse_ir(SOFTMAX_ROWS))) if k else SOFTMAX_ROWS
        rc, out, err = run(tmp_path, text, "--backend=c", "--check", "--input", f"0={tmp_path / 'x.npy'}",
                           "-o", str(tmp_path / f"o{k}.npz"))
        assert rc == 0, (steps[:k], err)
        z = np.load(tmp_path / f"o{k}.npz")
        outs.append(sorted((z[f] for f in z.files), key=lambda a: a.shape))  # names change once printed
    for vals in outs[1:]:
        for a, b in zip(vals, outs[0], strict=True):
            np.testing.assert_array_equal(a, b)


# ---- --backend=all ---------------------------------------------------------------------------------------------------
def _backend_lines(out: str) -> dict[str, str]:
    return dict(ln.split(": ", 1) for ln in out.splitlines())


def test_backend_all_prints_one_line_per_backend(tmp_path: Path) -> None:
    from uopir.backends.differential import backend_status
    from uopir.backends.registry import BACKENDS

    rc, out, err = run(tmp_path, SOFTMAX_ROWS, "--backend=all", "--seed", "2")
    assert rc == 0, (out, err)
    lines = _backend_lines(out)
    status = backend_status(BACKENDS)
    assert list(lines) == [s.name for s in status]  # every backend, in the registry's order
    assert "mlir" in lines  # not a Tensor device, but uop-run runs it: --backend=all once left it out
    for s in status:
        if s.available:
            assert lines[s.name].startswith("ok ("), lines[s.name]
        else:
            assert lines[s.name] == f"unavailable ({s.reason})"
    assert lines["python"] == "ok (bit-exact)"


def test_help_names_every_registered_backend() -> None:
    from uopir.backends.registry import BACKENDS
    from uopir.tools.uop_run import build_arg_parser

    text = " ".join(build_arg_parser().format_help().split())
    assert f"the backend that runs it: {', '.join(BACKENDS)}, or all" in text and "mlir" in BACKENDS


def test_backend_all_reports_a_mismatch_with_the_error_and_where(tmp_path: Path, monkeypatch) -> None:
    """A backend whose result is one element off: its line names the output, the error and the element; exit 1."""
    from uopir.tools import uop_run

    real = uop_run.run_schedule

    def one_off(backend, lowered, arrays, var_vals):
        got = real(backend, lowered, arrays, var_vals)
        if backend.device == "python":
            got[0] = got[0].copy()
            got[0][1, 2] += np.float32(0.25)
        return got
    monkeypatch.setattr(uop_run, "run_schedule", one_off)
    rc, out, err = run(tmp_path, SOFTMAX_ROWS, "--backend=all")
    assert rc == 1
    line = _backend_lines(out)["python"]
    assert line.startswith("mismatch: %y: MISMATCH (composite, tolerance 256 ulp): 1 of 15 elements beyond it; "
                           "max error 0.25 = ") and " at [1, 2]: got " in line, line
    assert err == "uop-run: error: not every backend agrees with the reference interpreter: python\n"


def test_backend_all_usage_errors(tmp_path: Path) -> None:
    rc, out, err = run(tmp_path, SOFTMAX_ROWS, "--backend=all", "-o", str(tmp_path / "o.npz"))
    assert rc == 1 and "-o writes one backend's outputs" in err and out == ""
    rc, out, err = run(tmp_path, SOFTMAX_ROWS, "--backend=ALL", "-p", "canonicalize")
    assert rc == 1 and "-p replaces one backend's pipeline" in err


@needs_cc
def test_backend_all_runs_kernel_level_programs(tmp_path: Path) -> None:
    rc, out, err = run(tmp_path, INT_KERNEL, "--backend=all", "--exact")
    assert rc == 0, err
    lines = _backend_lines(out)
    assert lines["python"] == "ok (bit-exact)" and lines["c"] == "ok (bit-exact)"
