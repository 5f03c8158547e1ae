"""Symbolic dimensions: Variable / bind / unbind / variables as in tinygrad, the canonical arithmetic of dims, their
`?` form in the text, the shape rules, the frontend's shape ops, and the lowering to kernel.var (one kernel for
every bound value), checked against numpy at several values."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import uopir
from uopir import Tensor, Variable
from uopir.backends import get_backend
from uopir.backends.python import evaluate, run_kernel
from uopir.dialects import kernel, tensor
from uopir.dialects.semantics import np_dtype
from uopir.frontend import device as D
from uopir.ir.diagnostics import IRError, ShapeError
from uopir.ir.dtype import dtypes
from uopir.ir.ops import DYN
from uopir.ir.parser import parse_ir, parse_type
from uopir.ir.printer import fmt_type, print_ir
from uopir.ir.symbolic import canon, render, sadd, seq, sfloordiv, smax, smin, smul, sprod, ssub, sym_infer, unbind
from uopir.ir.symbolic import var_vals as graph_var_vals
from uopir.ir.uop import UOp
from uopir.ir.verify import verify
from uopir.passes.manager import PassManager
from uopir.passes.tensor_to_kernel import schedule

IDX, F32 = dtypes.index, dtypes.float32
RNG = np.random.default_rng(7)


def _buf(i: int, shape: tuple[int, ...]) -> UOp:
    return UOp(tensor.BUFFER, F32, (), (i, "python", shape))


# ---- the API: Variable, bind, unbind, variables, unbind_all ---------------------------------------------------------
def test_variable_is_a_tensor_var_and_binds_like_tinygrad() -> None:
    n = Variable("n", 1, 128)
    assert uopir.Variable is Variable
    assert n.op is tensor.VAR and n.dtype is IDX and n.arg == ("n", 1, 128)
    b = n.bind(5)
    assert b.op is tensor.BIND and b.src[0] is n and b.src[1].arg == 5
    assert b.unbind() == (n, 5)
    assert Variable("n", 1, 128).bind(5) is b  # hash-consed: equal bindings are one UOp
    assert pickle.loads(pickle.dumps(b)) is b


@pytest.mark.parametrize("call, exc, msg", [
    (lambda: Variable("n", 1, 10).bind(11), ValueError, r"cannot bind variable 'n' to 11: outside its range \[1, 10\]"),
    (lambda: Variable("n", 1, 10).bind(2.5), TypeError, "binds to an int, got float"),
    (lambda: Variable("n", 5, 1), ValueError, "min_val 5 > max_val 1"),
    (lambda: Variable("", 0, 1), TypeError, "non-empty name"),
    (lambda: Variable("n", 0, 1.5), TypeError, "max_val must be an int"),
    (lambda: UOp.const(IDX, 3).bind(3), TypeError, "bind needs a variable"),
    (lambda: Variable("n", 0, 4).unbind(), TypeError, "unbind needs a bound variable"),
])
def test_api_errors_are_clear(call, exc, msg) -> None:
    with pytest.raises(exc, match=msg):
        call()


def test_variables_and_unbind_all() -> None:
    n, m = Variable("n", 1, 10), Variable("m", 0, 4)
    x = _buf(0, (10, 4))
    t = tensor.movement(tensor.SHRINK, x, ((0, n.bind(3)), (m, 4)))
    g = UOp.sink(t)
    assert g.variables() == [m, n]  # sorted by name, bound or not
    unbound, vals = g.unbind_all()
    assert vals == {n: 3} and unbound is unbind(g)
    assert all(u.op is not tensor.BIND for u in unbound.toposort())
    assert unbound.src[0].shape == (n, ssub(4, m))
    assert graph_var_vals(g) == {"n": 3}
    # two programs that differ only in the bound value have one unbound graph (a schedule cache keys on it)
    g2 = UOp.sink(tensor.movement(tensor.SHRINK, x, ((0, n.bind(7)), (m, 4))))
    assert g2 is not g and unbind(g2) is unbound and graph_var_vals(g2) == {"n": 7}


def test_one_variable_two_values_is_an_error() -> None:
    n = Variable("n", 1, 10)
    g = UOp.sink(n.bind(2) + 1, n.bind(3) + 1)
    with pytest.raises(ValueError, match="'n' is bound to two values: 2 and 3"):
        g.unbind_all()
    with pytest.raises(ValueError, match="bound to two values"):
        graph_var_vals(g)
    with pytest.raises(ValueError, match="two different variables are named 'n'"):
        graph_var_vals(UOp.sink(n.bind(2), Variable("n", 0, 5).bind(2)))


# ---- canonical arithmetic --------------------------------------------------------------------------------------------
def test_canonical_form_makes_equal_dims_one_uop() -> None:
    n, m = Variable("n", 1, 10), Variable("m", 1, 5)
    assert canon(n + 2) is canon(2 + n) is canon((n + 4) - 2) is sadd(n, 2)
    assert canon((n + 2) - n) == 2 and ssub(n + 7, n) == 7
    assert canon(n * 25) is canon(25 * n) is smul(5, smul(n, 5))
    assert seq(smul(n + 1, m), sadd(smul(n, m), m))
    assert not seq(n, m)
    assert sprod((n, 4, 1)) is canon(n * 4) and sprod((3, 4)) == 12
    assert sfloordiv(smul(n, 4), 2) is canon(n * 2)  # exact: every term divisible
    assert sfloordiv(sadd(smul(n, 4), 1), 2).op.name == "core.idiv"  # not exact: an opaque atom
    assert (smin(canon(10 - n)), smax(canon(10 - n))) == (0, 9)
    assert (smin(canon(n * m)), smax(canon(n * m))) == (1, 50)
    assert smax(n.bind(3)) == 10  # a binding spans its variable's range: shapes hold for every value


def test_sym_infer_and_render() -> None:
    n, m = Variable("n", 1, 10), Variable("m", 0, 9)
    assert sym_infer(canon(n.bind(3) * 4 + 2)) == 14
    assert sym_infer(canon(n * m - 3), {"n": 2, "m": 5}) == 7
    assert sym_infer(sfloordiv(sadd(smul(n, 4), 1), 2), {"n": 5}) == 10
    with pytest.raises(ValueError, match="variable 'm' has no value"):
        sym_infer(canon(n.bind(1) + m))
    assert [render(canon(e)) for e in (n + 2, n * 4, 10 - n, (n + 1) // 2, n * m - 3)] == \
        ["n+2", "n*4", "-n+10", "(n+1)//2", "m*n-3"]


# ---- the text: `?` in attributes and types ---------------------------------------------------------------------------
def test_symbolic_ops_round_trip_pretty_and_generic() -> None:
    n = Variable("n", 1, 10)
    b = n.bind(3)
    x = _buf(0, (3, 10))
    s = tensor.movement(tensor.SHRINK, x, ((0, 3), (0, b)))
    r = tensor.movement(tensor.RESHAPE, s, (b * 3,))
    p = tensor.movement(tensor.PAD, r, ((0, 30 - 3 * b),))
    w = tensor.movement(tensor.SHRINK, x, ((0, 3), (b, b + 2)))
    e = tensor.movement(tensor.EXPAND, tensor.movement(tensor.RESHAPE, x, (3, 10, 1)), (3, 10, n))
    g = UOp.sink(p, w + 1.0, e, s * 2.0)
    verify(g)
    assert (s.shape, p.shape, w.shape, e.shape) == ((3, b), (30,), (3, 2), (3, 10, n))
    text = print_ir(g)
    assert "tensor.shrink %0, %3 {bounds = [[0, 3], [0, ?]]} : tensor<3x?xf32>" in text
    assert "{pads = [[0, ?]]} : tensor<30xf32>" in text
    assert parse_ir(text) is g and print_ir(parse_ir(text)) == text
    generic = print_ir(g, generic=True)
    assert '"tensor.reshape"(%4, %5) {shape = [?]} : (tensor<3x?xf32>, index) -> tensor<?xf32>' in generic
    assert parse_ir(generic) is g


def test_type_syntax() -> None:
    n = Variable("n", 1, 4)
    assert fmt_type(F32, (3, n)) == "tensor<3x?xf32>"
    assert parse_type("tensor<3x?xf32>") == (F32, (3, DYN))
    assert parse_type("tensor<?x?xi32>") == (dtypes.int32, (DYN, DYN))
    assert repr(DYN) == "?" and pickle.loads(pickle.dumps(DYN)) is DYN


@pytest.mark.parametrize("text, msg", [
    ('%x = tensor.buffer {id = 0, device = "python"} : tensor<?xf32>\ncore.sink %x',
     "1:6: error: attribute 'shape' of 'tensor.buffer': expected an integer, got '?'"),
    ('%x = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>\n'
     '%s = tensor.shrink %x {bounds = [[0, ?]]} : tensor<?xf32>\ncore.sink %s',
     "2:1: error: 'tensor.shrink' op 1 '?' in the attribute but no symbolic operand"),
    ('%x = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>\n%n = tensor.var {name = "n", min = 0, '
     'max = 4} : index\n%s = tensor.shrink %x, %n {bounds = [[0, ?]]} : tensor<4xf32>\ncore.sink %s',
     "3:49: error: result type tensor<4xf32> does not match the inferred tensor<?xf32>"),
    ('%x = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>\n%n = tensor.var {name = "n", min = 0, '
     'max = 4} : index\n%s = tensor.reshape %x, %n {shape = [?]} : tensor<?xf32>\ncore.sink %s',
     "3:1: error: 'tensor.reshape' op cannot reshape [4] (4 elements) to [n] (n elements)"),
])
def test_text_errors_are_located(text: str, msg: str) -> None:
    with pytest.raises(IRError) as e:
        parse_ir(text)
    assert msg in str(e.value)


# ---- shape rules -----------------------------------------------------------------------------------------------------
def test_shape_rules() -> None:
    n = Variable("n", 1, 10)
    x = _buf(0, (3, 10))
    assert tensor.movement(tensor.SHRINK, x, ((0, 3), (n, n + 2))).shape == (3, 2)
    s = tensor.movement(tensor.SHRINK, x, ((0, 3), (0, n)))
    assert tensor.movement(tensor.PAD, s, ((0, 0), (0, 10 - n))).shape == (3, 10)
    assert tensor.movement(tensor.RESHAPE, s, (n, 3)).shape == (n, 3)
    assert tensor.movement(tensor.RESHAPE, s, (3 * n,)).shape == (canon(3 * n),)
    with pytest.raises(ShapeError, match=r"cannot reshape \[3, n\] \(n\*3 elements\) to \[n, 2\]"):
        _ = tensor.movement(tensor.RESHAPE, s, (n, 2)).shape
    with pytest.raises(ShapeError, match=r"cannot expand tensor<3x\?xf32> to \[3, 5\]: axis 1 has size n"):
        _ = tensor.movement(tensor.EXPAND, s, (3, 5)).shape
    # elementwise operands must have one shape: a dim is equal only to itself (its canonical form)
    other = tensor.movement(tensor.SHRINK, x, ((0, 3), (0, Variable("m", 1, 10))))
    with pytest.raises(ShapeError, match=r"different shapes: \[3, n\] vs \[3, m\]"):
        _ = (s + other).shape


def test_folds_leave_symbolic_ops_valid() -> None:
    n = Variable("n", 1, 10).bind(4)
    x = _buf(0, (3, 10))
    s = tensor.movement(tensor.SHRINK, x, ((0, 3), (0, n)))
    g = UOp.sink(tensor.movement(tensor.RESHAPE, tensor.movement(tensor.RESHAPE, s, (3 * n,)), (3, n)) * 0.0,
                 UOp(tensor.RESHAPE, F32, (tensor.movement(tensor.RESHAPE, x, (30,)),), (3, 10)))
    out = PassManager.parse("tensor-canonicalize").run(g)
    verify(out)
    ref = evaluate(g, {0: np.arange(30, dtype=np.float32).reshape(3, 10)})
    got = evaluate(out, {0: np.arange(30, dtype=np.float32).reshape(3, 10)})
    assert all(np.array_equal(a, b) for a, b in zip(ref, got, strict=True))


# ---- the frontend ----------------------------------------------------------------------------------------------------
A = RNG.standard_normal((3, 10)).astype(np.float32)
B = RNG.standard_normal((10, 5)).astype(np.float32)

# name -> (program of the tensors a (3x10), b (10x5) and a bound variable v, its numpy value at v = i)
PROGRAMS = {
    "plus1": (lambda a, b, v: a[:, :v] + 1, lambda i: A[:, :i] + 1),
    "matmul": (lambda a, b, v: a[:, :v] @ b[:v], lambda i: A[:, :i] @ B[:i]),
    "sum": (lambda a, b, v: a.shrink((None, (0, v))).sum(), lambda i: A[:, :i].sum()),
    "mean_rows": (lambda a, b, v: a[:, :v].mean(1), lambda i: A[:, :i].mean(1)),
    "var_cols": (lambda a, b, v: a[:, :v].var(0), lambda i: A[:, :i].var(0, ddof=1)),
    "window": (lambda a, b, v: a.shrink(((0, 2), (v, v + 2))), lambda i: A[0:2, i:i + 2]),
    "reshape": (lambda a, b, v: a[:, :v].reshape(3 * v) * 2, lambda i: A[:, :i].reshape(-1) * 2),
    "reshape_infer": (lambda a, b, v: a[:, :v].T.reshape(-1, 1), lambda i: A[:, :i].T.reshape(-1, 1)),
    "pad_back": (lambda a, b, v: (a[:, :v] + 1).pad((None, (0, 10 - v))),
                 lambda i: np.pad(A[:, :i] + 1, ((0, 0), (0, 10 - i)))),
    "cat": (lambda a, b, v: a[:, :v].cat(a[:, :2], dim=1), lambda i: np.concatenate([A[:, :i], A[:, :2]], 1)),
    "ones_expand": (lambda a, b, v: Tensor.ones(v, 3) * a[:1, :3], lambda i: np.ones((i, 3), np.float32) * A[:1, :3]),
    "flip": (lambda a, b, v: a[:, :v].flip(1), lambda i: A[:, :i][:, ::-1]),
    "softmax": (lambda a, b, v: a[:, :v].softmax(1),
                lambda i: np.exp(A[:, :i] - A[:, :i].max(1, keepdims=True)) /
                np.exp(A[:, :i] - A[:, :i].max(1, keepdims=True)).sum(1, keepdims=True)),
}


def _inputs() -> tuple[Tensor, Tensor]:
    return Tensor(A).realize(), Tensor(B).realize()


def _run_schedule(root: UOp, var_vals: dict[str, int] | None = None) -> tuple[list[np.ndarray], tuple[UOp, ...]]:
    """Lower root (tensor-canonicalize, tensor-to-kernel), check that the scheduled program verifies and round trips,
    run it kernel by kernel (tensor.call -> run_kernel) and return the results and the kernels it ran."""
    out = PassManager.parse("tensor-canonicalize,tensor-to-kernel").run(root)
    verify(out)
    assert parse_ir(print_ir(out)) is out
    inputs = {b for b in root.toposort() if b.op is tensor.BUFFER}
    bufs = {b.arg[0]: D.buffer_data(b) if b in inputs else np.zeros(b.arg[2], np_dtype(b.dtype))
            for b in out.toposort() if b.op is tensor.BUFFER}
    res = evaluate(out, bufs, var_vals)
    return res, tuple(u.arg[0] for u in out.toposort() if u.op is tensor.CALL)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_match_numpy_with_one_kernel_set_for_every_value(name: str) -> None:
    build, ref = PROGRAMS[name]
    a, b = _inputs()
    kernels = []
    for i in (1, 4, 7):
        t = build(a, b, Variable("i", 1, 10).bind(i))
        verify(t.uop)
        exp = np.asarray(ref(i))
        res, ks = _run_schedule(UOp.sink(t.uop))
        got = np.asarray(res[0])[tuple(slice(0, n) for n in exp.shape)]  # a symbolic result: its bound part
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(t.numpy(), exp, rtol=1e-5, atol=1e-5)  # the frontend's realize
        kernels.append(ks)
    assert kernels[0], "the program runs at least one kernel"
    assert all(k == kernels[0] for k in kernels)  # the same kernel UOps for every value: identical IR
    assert any(x.op is kernel.VAR for k in kernels[0] for x in k.toposort())  # the variable, never its value
    assert len({print_ir(k) for ks in kernels for k in ks}) == len(kernels[0])


def test_bound_values_reach_kernels_through_the_call_or_var_vals() -> None:
    a, _ = _inputs()
    t = (a[:, :Variable("i", 1, 10).bind(4)] + 1).sum(1)
    g = UOp.sink(t.uop)
    out = PassManager.parse("tensor-to-kernel").run(g)
    call = next(u for u in out.toposort() if u.op is tensor.CALL)
    assert [s.op for s in call.src if s.dtype is IDX] == [tensor.BIND]  # the binding is a call operand
    # unbound: the call passes the variable; its value comes at run time, by name
    res_b, ks_b = _run_schedule(g)
    res_u, ks_u = _run_schedule(unbind(g), {"i": 4})
    assert ks_b == ks_u
    np.testing.assert_array_equal(res_b[0], res_u[0])
    np.testing.assert_allclose(res_b[0].reshape(-1), (A[:, :4] + 1).sum(1), rtol=1e-5)
    with pytest.raises(IRError, match="variable 'i' is not bound"):
        _run_schedule(unbind(g))


def test_kernel_execution_takes_var_values() -> None:
    """run_kernel and the python runtime's launch both take the values of a kernel's kernel.vars."""
    a, _ = _inputs()
    t = a[:, :Variable("i", 1, 10).bind(2)] * 2
    (item,) = schedule(UOp.sink(t.uop))[0]
    assert [b.arg[2] for b in item.buffers] == [(3, 10), (3, 10)]  # a symbolic result: its largest shape
    for i in (3, 9):
        out = np.zeros((3, 10), np.float32)
        run_kernel(item.ast, [out, A.copy()], {"i": i})
        np.testing.assert_array_equal(out[:, :i], A[:, :i] * 2)
        assert not out[:, i:].any()
        be = get_backend("python")
        prog = be.compile(item.ast, item.name)
        bufs = [be.allocator.from_numpy(np.zeros((3, 10), np.float32), F32), be.allocator.from_numpy(A.copy(), F32)]
        be.runtime.launch(prog, bufs, var_vals={"i": i})
        np.testing.assert_array_equal(bufs[0].numpy()[:, :i], A[:, :i] * 2)
    with pytest.raises(IRError, match="variable 'i' is not bound"):
        run_kernel(item.ast, [np.zeros((3, 10), np.float32), A.copy()])


def test_kv_cache_writes_one_row_per_position_with_one_kernel() -> None:
    """A growing KV cache at the IR level: assign a row at [pos, pos+1), then sum rows [0, pos+1)."""
    cache, new = _buf(0, (16, 4)), _buf(1, (1, 4))
    data = np.zeros((16, 4), np.float32)
    seen: set[tuple[UOp, ...]] = set()
    for pos in range(4):
        p = Variable("pos", 0, 15).bind(pos)
        row = tensor.movement(tensor.SHRINK, cache, ((p, p + 1), (0, 4)))
        out = PassManager.parse("tensor-to-kernel").run(UOp.sink(UOp(tensor.ASSIGN, F32, (row, new))))
        verify(out)
        bufs = {b.arg[0]: np.zeros(b.arg[2], np.float32) for b in out.toposort() if b.op is tensor.BUFFER}
        val = RNG.standard_normal((1, 4)).astype(np.float32)
        bufs[0], bufs[1] = data, val
        evaluate(out, bufs)
        np.testing.assert_array_equal(data[pos], val[0])
        seen.add(tuple(u.arg[0] for u in out.toposort() if u.op is tensor.CALL))
        hist = UOp(tensor.REDUCE, F32, (tensor.movement(tensor.SHRINK, cache, ((0, p + 1), (0, 4))),), ("add", (0,)))
        out2 = PassManager.parse("tensor-to-kernel").run(UOp.sink(hist))
        bufs2 = {b.arg[0]: np.zeros(b.arg[2], np.float32) for b in out2.toposort() if b.op is tensor.BUFFER}
        bufs2[0] = data
        np.testing.assert_allclose(evaluate(out2, bufs2)[0].reshape(-1), data[:pos + 1].sum(0), rtol=1e-6)
    assert len(seen) == 1


def test_slicing_with_variables() -> None:
    a, _ = _inputs()
    for i in (1, 5, 9):
        n = Variable("n", 1, 10).bind(i)
        np.testing.assert_array_equal(a[1, n].numpy(), A[1, i])  # an int index by a variable
        np.testing.assert_array_equal(a[:, n:].numpy(), A[:, i:])
        np.testing.assert_array_equal(a[:, -n:].numpy(), A[:, -i:])  # a negative index counts from the end
        np.testing.assert_array_equal(a[:, :n][:, -1].numpy(), A[:, :i][:, -1])  # ... of a symbolic dim too
        assert a[:, :n][:, 1:].shape == (3, canon(n - 1))
        if i + 2 <= 10:
            assert a[:, n:n + 2].shape == (3, 2)
        else:  # no clamping as numpy's: a symbolic slice past the end is an error at the bound value
            with pytest.raises(ValueError, match=r"shrink \(\(0, 3\), \(n, n\+2\)\) is out of bounds"):
                a[:, n:n + 2]


def test_frontend_doc_example_kv_prefix() -> None:
    """docs/frontend.md: a softmax over a growing prefix of a cache, one set of kernels for every length."""
    cache = Tensor(RNG.random((16, 4)).astype(np.float32)).realize()
    c = cache.numpy()
    seen = set()
    for pos in range(1, 5):
        out = cache[:Variable("n", 1, 16).bind(pos)].softmax(0).sum(0)
        e = np.exp(c[:pos] - c[:pos].max(0))
        np.testing.assert_allclose(out.numpy(), (e / e.sum(0)).sum(0), rtol=1e-5)
        seen.add(tuple(item.ast for item in out.schedule()))
    assert len(seen) == 1


def test_realize_keeps_the_symbolic_shape_over_a_padded_buffer() -> None:
    a, _ = _inputs()
    v = Variable("i", 1, 10).bind(3)
    t = (a[:, :v] + 1).realize()
    assert t.shape == (3, v)
    base = t.uop.src[0]
    assert t.uop.op is tensor.SHRINK and base.op is tensor.BUFFER and base.arg[2] == (3, 10)
    np.testing.assert_allclose(t.numpy(), A[:, :3] + 1, rtol=1e-6)
    assert t.realize() is t and t.uop.src[0] is base  # realizing again is free
    np.testing.assert_allclose(t[:, :2].numpy(), A[:, :2] + 1, rtol=1e-6)  # a static slice of it
    with pytest.raises(ValueError, match="realize: variable 'j' is not bound"):
        (a[:, :Variable("j", 1, 10)] + 1).numpy()


# ---- frontend errors -------------------------------------------------------------------------------------------------
def _err_cases():
    a = Tensor(A)
    v = Variable("i", 1, 10).bind(4)
    return [
        (lambda: a.reshape(3, v), ValueError, r"reshape: cannot reshape \(3, 10\) \(30 elements\) to \(3, i\)"),
        (lambda: a.shrink(((0, 3), (v, v + 8))), ValueError,
         r"shrink \(\(0, 3\), \(i, i\+8\)\) is out of bounds for shape \(3, 10\): dim 1 needs "
         r"0 <= i <= i\+8 <= 10, which is 0 <= 4 <= 12 <= 10 at the bound values"),
        (lambda: a[:, :v].pad((None, (0, 3 - v))), ValueError, r"pad: amount -i\+3 is -1 at its bound value"),
        (lambda: a[:, :v].expand(3, 5), ValueError, r"cannot expand \(3, i\) to \(3, 5\): dim 1 has size i, not 1"),
        (lambda: Tensor.rand(v, 3), ValueError, r"shape \(i, 3\) .*needs a static shape"),
        (lambda: Tensor.empty(3, v), ValueError, "needs a static shape"),
        (lambda: a.shrink(((0, 3), (0, 2.5))), TypeError, "shrink: expected an int or a Variable, got float"),
        (lambda: a[:, :v] + a[:, :Variable("i", 1, 10).bind(5)], ValueError,
         r"shapes \(3, i\), \(3, i\) cannot be broadcast together"),
        (lambda: a[:, :v].reshape(-1, v), ValueError, "cannot infer the -1"),
        (lambda: Tensor.arange(v), TypeError, "arange: start, stop and step must be numbers, not symbolic"),
        (lambda: a[:, :v:2], IndexError, "a slice with a symbolic bound, or of a symbolic dim, takes step 1"),
    ]


@pytest.mark.parametrize("k", range(11))
def test_frontend_errors_name_the_op_and_dims(k: int) -> None:
    call, exc, msg = _err_cases()[k]
    with pytest.raises(exc, match=msg):
        call()
