"""Bad inputs found by an adversarial hunt: each gets a clear error (a located one where there is a location), never
a Python traceback, an internal error, a silently changed request, or a wrong answer. One test per defect; the
docstring says what happened before.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_uop_run import run  # uop-run on a .uop text, in process: (exit code, stdout, stderr)

from uopir import Tensor
from uopir.backends.c.compiler import find_cc
from uopir.backends.python.device import run_program
from uopir.ir.diagnostics import BufferTooLarge, check_buffer_size, host_memory_bytes
from uopir.ir.parser import parse_ir
from uopir.ir.regions import regions_of
from uopir.passes.manager import PassManager

RELU = """\
%0 = tensor.buffer {id = 0, device = "python"} : tensor<4xi32>
%1 = core.const 0 : i32
%2 = core.max %0, %1 : tensor<4xi32>
core.sink %2
"""


# ---- uop-run ---------------------------------------------------------------------------------------------------------
def test_uop_run_negative_seed_is_a_usage_error(tmp_path: Path) -> None:
    """Was: `internal error: ValueError: expected non-negative integer` (numpy's generator), exit 2."""
    rc, _, err = run(tmp_path, RELU, "--seed", "-1")
    assert rc == 1 and "argument --seed: expected an integer >= 0, got -1" in err and "internal" not in err


def test_uop_run_input_given_twice_is_an_error(tmp_path: Path) -> None:
    """Was: the last --input silently won, also when the two spell the same buffer differently (id and %name)."""
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.int32))
    x = str(tmp_path / "x.npy")
    rc, _, err = run(tmp_path, RELU, "--input", f"0={x}", "--input", f"0={x}")
    assert rc == 1 and "--input 0: given twice" in err
    rc, _, err = run(tmp_path, RELU, "--input", f"0={x}", "--input", f"%0={x}")
    assert rc == 1 and "--input %0: buffer %0 is given twice" in err


def test_uop_run_unknown_var_is_an_error(tmp_path: Path) -> None:
    """Was: `--var n=3` for a program without variable n was ignored (a misspelt name went unnoticed)."""
    rc, _, err = run(tmp_path, RELU, "--var", "n=3")
    assert rc == 1 and "--var n: the program has no such variable (its variables: none)" in err


def test_uop_run_output_needs_npz_or_npy(tmp_path: Path) -> None:
    """Was: `-o out.txt` exited 0 having written out.txt.npz (numpy appends the suffix)."""
    rc, _, err = run(tmp_path, RELU, "-o", str(tmp_path / "out.txt"))
    assert rc == 1 and "the output file must end in .npz (every output) or .npy" in err
    assert not (tmp_path / "out.txt.npz").exists() and not (tmp_path / "out.txt").exists()


def test_uop_run_buffer_beyond_memory_is_an_error_before_allocating(tmp_path: Path) -> None:
    """Was: `internal error: ValueError: array is too big` (or a MemoryError), exit 2."""
    text = RELU.replace("tensor<4xi32>", "tensor<100000x100000x100000xi32>")
    rc, _, err = run(tmp_path, text)
    assert rc == 1 and "more than this machine's memory" in err and "internal" not in err


def test_uop_run_skips_a_vectorized_loop_of_no_iterations(tmp_path: Path) -> None:
    """Was: `out-of-bounds store (buffer of 0 elements)`: the device interpreter ran a loop of 0 iterations as an
    empty numpy axis, which a store whose address does not use the loop index never saw (fuzz seed 4242)."""
    text = """\
%0 = tensor.buffer {id = 1, device = "python"} : tensor<0x6xf32>
%1 = core.const 1.0 : f32
%2 = tensor.assign %0, %1 : tensor<0x6xf32>
core.sink %2
"""
    rc, out, err = run(tmp_path, text, "-p", "default,kernel-simplify,cleanup", "--check", "--exact")
    assert rc == 0, err
    assert "tensor<0x6xf32>  (empty)" in out and "check %2: bit-exact" in out


CALL_TOO_FEW_BUFFERS = """\
%0 = tensor.buffer {id = 1, device = "python"} : tensor<4xf32>
%1 = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>
%2 = tensor.call %0, %1 {name = "E_4"} ({
  %0 = kernel.param {idx = 0} : ptr<f32, global>
  %1 = core.const 4 : index
  %2 = kernel.range %1 {axis = 0} : index
  %3 = kernel.index %0, %2 : ptr<f32, global>
  %4 = kernel.param {idx = 2} : ptr<f32, global>
  %5 = kernel.index %4, %2 : ptr<f32, global>
  %6 = kernel.load %5 : f32
  %7 = core.neg %6 : f32
  %8 = kernel.store %3, %7
  %9 = kernel.end %8, %2
  kernel.def %9 {name = "E_4"}
})
%3 = tensor.after %0, %2 : tensor<4xf32>
core.sink %3
"""


@pytest.mark.parametrize("backend", ["python", "c"])
def test_uop_run_kernel_param_beyond_the_calls_buffers_is_located(tmp_path: Path, backend: str) -> None:
    """Was (c): `internal error: ValueError: kernel E_4 takes 3 buffers, got 2` from the C runtime, exit 2 (a
    mutated kernel.param index; the python backend already gave a located error)."""
    if backend == "c" and find_cc() is None:
        pytest.skip("no C compiler")
    rc, _, err = run(tmp_path, CALL_TOO_FEW_BUFFERS, "--backend", backend)
    assert rc == 1 and "internal" not in err, err
    assert "prog.uop:8:3: error:" in err and "kernel.param" in err and "2 buffer" in err


def test_empty_slice_past_the_end_is_not_loaded() -> None:
    """Was: `out-of-bounds load (buffer of 5 elements)`: the range of a loop of no iterations had the value range
    [0, 0], so kernel-simplify folded the address r + 5 to 5 and the linearizer hoisted that load out of the empty
    loop, where it ran (a read past the end on a compiled backend; fuzz seed 777)."""
    text = """\
%x = tensor.buffer {id = 5, device = "python"} : tensor<5xf64>
%d = tensor.detach %x : tensor<5xf64>
%e = tensor.shrink %d {bounds = [[5, 5]]} : tensor<0xf64>
core.sink %e
"""
    lowered = PassManager.parse("default,dce").run(parse_ir(text))
    prog = next(r for u in lowered.toposort() for r in regions_of(u) if r.op.name == "device.program")
    order = [u.op.name for u in prog.src]
    assert order.index("kernel.load") > order.index("device.loop")
    out, src = np.zeros(0, np.float64), np.arange(5, dtype=np.float64)
    run_program(prog, [out, src])  # raised the out-of-bounds load
    assert out.shape == (0,)


# ---- memory ----------------------------------------------------------------------------------------------------------
def test_buffer_too_large_is_refused_before_allocating() -> None:
    """Was: numpy's `MemoryError: Unable to allocate 3.47 EiB` from inside the runtime, or with memory overcommit
    an allocation that succeeds and kills the process on first write."""
    limit = host_memory_bytes()
    if limit is None:
        pytest.skip("the OS does not report its memory size")
    check_buffer_size((limit // 4,), 4, "a buffer")  # exactly the memory: allowed
    with pytest.raises(BufferTooLarge, match=r"a buffer of shape \(\d+,\) needs .* more than this machine's memory"):
        check_buffer_size((limit // 4 + 1,), 4, "a buffer")
    with pytest.raises(BufferTooLarge, match=r"a buffer of f32 on \w+ of shape \(1000000, 1000000, 1000000\)"):
        Tensor.zeros(10**6, 10**6, 10**6).contiguous().realize()


# ---- Tensor API ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, msg", [
    ({"stride": 0}, r"conv stride \(0, 0\) must be ints >= 1"),
    ({"dilation": 0}, r"conv dilation \(0, 0\) must be ints >= 1"),
    ({"stride": (1, -1)}, r"conv stride \(1, -1\) must be ints >= 1"),
    ({"stride": 1.5}, r"conv stride 1.5 must be an int >= 1 or 2 of them"),
    ({"stride": (1, 1, 1)}, r"conv stride \(1, 1, 1\) needs 2 entries"),
])
def test_conv_stride_and_dilation_must_be_positive_ints(kw: dict, msg: str) -> None:
    """Was: stride=0 raised `ZeroDivisionError: integer division or modulo by zero` from the patch arithmetic."""
    x, w = Tensor.ones(1, 1, 5, 5), Tensor.ones(1, 1, 3, 3)
    with pytest.raises(ValueError, match=msg):
        x.conv2d(w, **kw)


def test_pool_kernel_and_stride_must_be_positive_ints() -> None:
    """Was: kernel_size=0 or stride=0 raised ZeroDivisionError; the valid call still gives the right values."""
    x = Tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"pooling kernel_size \(2, 0\) must be ints >= 1"):
        x.max_pool2d(kernel_size=(2, 0))
    with pytest.raises(ValueError, match=r"pooling stride \(0, 0\) must be ints >= 1"):
        x.avg_pool2d(kernel_size=2, stride=0)
    np.testing.assert_array_equal(x.max_pool2d(2, stride=np.int64(2)).numpy().reshape(-1), [5, 7, 13, 15])


def test_constant_shift_amount_must_fit_the_width() -> None:
    """Was: `int32 << -1` gave [-2147483648, 0] for [1, 2] (the amount taken mod 32; numpy gives 0, C is undefined)."""
    t = Tensor(np.array([1, 2], np.int32))
    for y in (-1, 32):
        with pytest.raises(ValueError, match=rf"shift amount {y} is out of range for i32 \(0 to 31\)"):
            t << y
    np.testing.assert_array_equal((t << 31).numpy(), np.array([1, 2], np.int32) << 31)


def test_cast_to_a_pointer_vector_or_void_dtype_is_a_type_error() -> None:
    """Was: the cast built lazily and realizing it failed inside the C renderer with `KeyError: ptr<f32, global>`."""
    from uopir.ir.dtype import dtypes
    t = Tensor(np.ones(2, np.float32))
    for d in (dtypes.float32.ptr(), dtypes.float32.vec(4), dtypes.void):
        with pytest.raises(TypeError, match=r"is not a tensor element dtype"):
            t.cast(d)
    np.testing.assert_array_equal(t.cast(dtypes.int32).numpy(), [1, 1])


def test_dropout_probability_outside_0_1_is_an_error() -> None:
    """Was: dropout(1.5) returned the input outside training and scaled by 1/(1-p) = -2 in training."""
    with pytest.raises(ValueError, match=r"dropout probability must be between 0 and 1, got 1.5"):
        Tensor.ones(3).dropout(1.5)


# ---- ONNX ----------------------------------------------------------------------------------------------------
def _model(nodes: list, inputs: list, outputs: list, inits: tuple = ()) -> bytes:
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _vi(name: str, shape: list | None) -> object:
    onnx = pytest.importorskip("onnx")
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


def _import_error(model: bytes) -> str:
    from uopir.onnx.importer import from_onnx
    from uopir.onnx.registry import OnnxImportError
    with pytest.raises(OnnxImportError) as e:
        m = from_onnx(model, device="python")
        m(m.example_inputs())
    return str(e.value)


def test_onnx_negative_dim_is_an_import_error() -> None:
    """Was: `internal error: ValueError: negative dimensions are not allowed` when uop-opt drew example inputs."""
    onnx = pytest.importorskip("onnx")
    relu = onnx.helper.make_node("Relu", ["a"], ["c"], name="r0")
    msg = _import_error(_model([relu], [_vi("a", [2, -3])], [_vi("c", None)]))
    assert "graph input 'a': dim 1 is -3 (a dim is a size >= 0 or a name)" in msg


def test_onnx_empty_model_is_an_import_error() -> None:
    """Was: an empty (0-byte) .onnx file parsed as an empty ModelProto and printed `core.sink`, exit 0."""
    assert "the model's graph has no outputs" in _import_error(b"")


def test_onnx_value_defined_twice_is_an_import_error() -> None:
    """Was: the second node writing output 'c' silently replaced the first's value."""
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    nodes = [h.make_node("Relu", ["a"], ["c"], name="r0"), h.make_node("Neg", ["a"], ["c"], name="n1")]
    msg = _import_error(_model(nodes, [_vi("a", [2])], [_vi("c", None)]))
    assert "node 'n1' (Neg, opset 17): output 'c' is already an output of node 'r0'" in msg
    nodes = [h.make_node("Relu", ["a"], ["a"], name="r0")]
    assert "output 'a' is already a graph input" in _import_error(_model(nodes, [_vi("a", [2])], [_vi("a", None)]))


def test_onnx_huge_input_is_refused_before_allocating_example_inputs() -> None:
    """Was: `internal error: MemoryError: Unable to allocate 6.94 EiB` in uop-opt/uop-run."""
    onnx = pytest.importorskip("onnx")
    relu = onnx.helper.make_node("Relu", ["a"], ["c"], name="r0")
    msg = _import_error(_model([relu], [_vi("a", [10**6, 10**6, 10**6])], [_vi("c", None)]))
    assert "cannot make a random example input: graph input 'a' of shape (1000000, 1000000, 1000000)" in msg


def test_onnx_conv_stride_zero_names_the_node() -> None:
    """Was: `node 'c0' (Conv, opset 17): ZeroDivisionError: integer division or modulo by zero`."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    conv = onnx.helper.make_node("Conv", ["a", "w"], ["c"], name="c0", strides=[0, 0])
    w = numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "w")
    msg = _import_error(_model([conv], [_vi("a", [1, 1, 4, 4])], [_vi("c", None)], (w,)))
    assert "node 'c0' (Conv, opset 17): ValueError: conv stride (0, 0) must be ints >= 1" in msg
