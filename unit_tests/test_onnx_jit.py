"""OnnxModel's captured plans (from_onnx(..., jit=True), the default): the first call of an input signature builds
the graph and captures its kernels, later calls replay them on new data; a graph that reads values computed from its
inputs on the host while it is built (NonZero, a computed shape) is rebuilt on every call. Each call's result is
compared with onnxruntime / numpy on new data, and `model.stats` counts the graph builds.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from uopir.onnx import from_onnx  # noqa: E402
from uopir.onnx.testmodels import small_cnn  # noqa: E402

F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def _model(nodes: list, inputs: list, outputs: list, inits: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    from onnx import numpy_helper
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return m


def test_replay_matches_onnxruntime_on_new_data() -> None:
    m, feeds = small_cnn(batch=1, size=8)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    model = from_onnx(m)
    rng = np.random.default_rng(1)
    outs = []
    for _ in range(3):
        x = rng.standard_normal(feeds["x"].shape).astype(np.float32)
        outs.append(model(x=x)["logits"])  # kept: a replay must not overwrite an earlier result
        np.testing.assert_allclose(outs[-1].numpy(), sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert model.stats == {"builds": 1, "captures": 1, "replays": 2, "dynamic": 0}
    assert not np.array_equal(outs[0].numpy(), outs[2].numpy())


def test_new_shape_new_plan_and_jit_off() -> None:
    # y = Reshape(x * w, [Shape(x)[0], -1]): the shape is read on the host but depends on the shape only
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"]),
             helper.make_node("Shape", ["x"], ["s"], end=1),
             helper.make_node("Concat", ["s", "m1"], ["shp"], axis=0),
             helper.make_node("Reshape", ["xw", "shp"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, ["n", 2, 3])],
               [helper.make_tensor_value_info("y", F, None)],
               {"w": np.arange(3, dtype=np.float32), "m1": np.array([-1], np.int64)})
    model, plain = from_onnx(m), from_onnx(m, jit=False)
    rng = np.random.default_rng(2)
    for n in (2, 2, 3, 2, 3):
        x = rng.standard_normal((n, 2, 3)).astype(np.float32)
        want = (x * np.arange(3, dtype=np.float32)).reshape(n, -1)
        np.testing.assert_allclose(model.run(x=x)["y"], want, rtol=1e-6)
        np.testing.assert_allclose(plain.run(x=x)["y"], want, rtol=1e-6)
    assert model.stats == {"builds": 2, "captures": 2, "replays": 3, "dynamic": 0}
    assert plain.stats["builds"] == 5 and plain.stats["replays"] == 0


def test_data_dependent_graphs_rebuild() -> None:
    # NonZero: the output shape is the float data's; Reshape by a shape computed from an int input: its values shape
    # the graph
    nz = _model([helper.make_node("Greater", ["x", "zero"], ["pos"]), helper.make_node("NonZero", ["pos"], ["y"])],
                [helper.make_tensor_value_info("x", F, [6])], [helper.make_tensor_value_info("y", I64, None)],
                {"zero": np.zeros((), np.float32)})
    rs = _model([helper.make_node("Abs", ["s"], ["sa"]), helper.make_node("Reshape", ["x", "sa"], ["y"])],
                [helper.make_tensor_value_info("x", F, [6]), helper.make_tensor_value_info("s", I64, [2])],
                [helper.make_tensor_value_info("y", F, None)])
    m_nz, m_rs = from_onnx(nz), from_onnx(rs)
    x = np.arange(6, dtype=np.float32) - 2.5
    for i, shape in enumerate([(2, 3), (3, 2), (2, 3), (-6, 1)]):
        xi = np.roll(x, i)
        np.testing.assert_array_equal(m_nz.run(x=xi)["y"], np.stack(np.nonzero(xi > 0)))
        y = m_rs.run(x=xi, s=np.array(shape, np.int64))["y"]
        np.testing.assert_array_equal(y, xi.reshape(np.abs(shape)))
    assert m_nz.stats == {"builds": 4, "captures": 0, "replays": 0, "dynamic": 1}
    # the shape read on the host comes from a small int input: one plan per value of s, (2, 3) replayed
    assert m_rs.stats == {"builds": 3, "captures": 3, "replays": 1, "dynamic": 0}


def test_weights_repacked_once_per_plan() -> None:
    # a conv whose schedule re-packs its weight (channel blocks): the packing kernel reads only an initializer, so the
    # native replay runs it once when its graph is built; a feed that overrides the weight makes it an input again
    from uopir.backends import available
    from uopir.backends.cpu import graph as G
    from uopir.frontend.jit import _NativeReplay
    host = [d for d in ("llvm", "c") if d in available()]
    if not host or G.native() is None:
        pytest.skip("no host-cpu backend or no C compiler")
    rng = np.random.default_rng(5)
    w = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
               [helper.make_tensor_value_info("x", F, [1, 32, 16, 16])],
               [helper.make_tensor_value_info("y", F, None)], {"w": w})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    model = from_onnx(m, device=host[0])
    for _ in range(4):
        x = rng.standard_normal((1, 32, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(model.run(x=x)["y"], sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    jit = next(iter(model._plans.values()))
    assert isinstance(jit._graph, _NativeReplay)
    steps = sum(len(st.launch.plan.steps) for st in jit.steps)
    assert jit._graph.graph.kernels < steps  # the weight's packing is not replayed
    w2 = rng.standard_normal(w.shape).astype(np.float32)
    m2 = _model(list(m.graph.node), list(m.graph.input), list(m.graph.output), {"w": w2})
    sess = ort.InferenceSession(m2.SerializeToString(), providers=["CPUExecutionProvider"])
    for _ in range(3):
        x = rng.standard_normal((1, 32, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(model.run(x=x, w=w2)["y"], sess.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-4)


def test_steady_calls_on_a_host_cpu_make_numpy_outputs_in_the_native_replay() -> None:
    # on c, once the plan's native graph exists, `run` binds fresh numpy arrays into it (TinyJit.replay_arrays): the
    # outputs are this call's own arrays (a later call, a change to the feed, or writing into an output touches no
    # other result and not the weight), a weight returned as it is comes back as a copy
    from uopir.backends import available
    from uopir.backends.cpu.graph import native
    if "c" not in available() or native() is None:
        pytest.skip("needs the c backend and its native launch graph")
    from uopir.onnx.replay import signature
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"]), helper.make_node("Identity", ["x"], ["xi"]),
             helper.make_node("Identity", ["w"], ["wi"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
               [helper.make_tensor_value_info(n, F, [2, 3]) for n in ("y", "xi", "wi")], {"w": w})
    model = from_onnx(m, device="c")
    rng = np.random.default_rng(6)
    kept = []
    for _ in range(6):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        want = x.copy()
        out = model.run(x=x)
        x[:] = 7
        np.testing.assert_array_equal(out["y"], want + w)
        np.testing.assert_array_equal(out["xi"], want)
        np.testing.assert_array_equal(out["wi"], w)
        out["wi"][:] = -1
        kept.append((out, want))
    fp = model._fast[signature({"x": x})]
    assert fp.run_arrays({"x": x}) is not None  # the arrays' way was taken (the graph is built)
    for out, want in kept:
        np.testing.assert_array_equal(out["xi"], want)
        np.testing.assert_array_equal(out["y"], want + w)
    np.testing.assert_array_equal(model.run(x=np.ones((2, 3), np.float32))["wi"], w)


def test_steady_calls_copy_feeds_and_return_fresh_buffers() -> None:
    # from the third call of a numpy signature the feeds are copied straight into the plan's input buffers
    # (uopir.onnx.replay): every output is still this call's own (or a copy), and the checked errors stay
    from uopir.onnx.registry import OnnxImportError
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"]), helper.make_node("Identity", ["x"], ["xi"]),
             helper.make_node("Identity", ["w"], ["wi"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
               [helper.make_tensor_value_info(n, F, [2, 3]) for n in ("y", "xi", "wi")], {"w": w})
    model = from_onnx(m)
    rng = np.random.default_rng(5)
    kept, tensors = [], []
    for i in range(6):
        x = rng.standard_normal(6).astype(np.float32)  # (6,): reshaped to the declared (2, 3)
        want = x.reshape(2, 3).copy()
        r = model.run(x=x) if i % 2 else None
        t = model(x=x) if r is None else None
        x[:] = 7  # the caller's array changes after the call: no output sees it
        out = r if r is not None else {k: v.numpy() for k, v in t.items()}
        np.testing.assert_array_equal(out["y"], want + w)
        np.testing.assert_array_equal(out["xi"], want)
        np.testing.assert_array_equal(out["wi"], w)
        if r is not None:
            r["wi"][:] = -1  # a copy: the model's weight is untouched
        else:
            tensors.append((t, want))
        kept.append((out, want))
    assert len(model._fast) == 1 and model.stats["builds"] == 1 and model.stats["replays"] == 5
    for out, want in kept:  # no later call wrote an earlier result
        np.testing.assert_array_equal(out["xi"], want)
        np.testing.assert_array_equal(out["y"], want + w)
    for t, want in tensors:
        np.testing.assert_array_equal(t["y"].numpy(), want + w)
    with pytest.raises(OnnxImportError, match=r"input 'x': dtype f64, the model wants f32"):
        model.run(x=np.zeros(6))
    with pytest.raises(OnnxImportError, match=r"input 'x': shape \(7,\) does not match"):
        model.run(x=np.zeros(7, np.float32))
    with pytest.raises(OnnxImportError, match=r"unknown input\(s\) \['z'\]"):
        model.run(x=np.zeros(6, np.float32), z=np.zeros(1, np.float32))
    model.reset_plans()
    assert not model._fast
    np.testing.assert_array_equal(model.run(x=np.ones(6, np.float32))["y"], w + 1)


def test_steady_calls_read_a_read_only_feed_in_place() -> None:
    # a steady call binds each feed's address into the native graph (runtime.array_address: a ctypes view where the
    # array is writable, numpy's own address for a read-only or empty one); the caller's dict is read, never changed
    from uopir.backends.cpu.runtime import array_address
    for a in (np.arange(6, dtype=np.float32), np.zeros(0, np.float32), np.arange(8, dtype=np.int64)[::2]):
        ro = a.copy()
        ro.flags.writeable = False
        assert array_address(a) == a.ctypes.data and array_address(ro) == ro.ctypes.data
    from uopir.backends import available
    from uopir.backends.cpu.graph import native
    m = _model([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])],
               [helper.make_tensor_value_info("x", F, [2, 3])], [helper.make_tensor_value_info("y", F, [3, 2])])
    model = from_onnx(m, device="c") if "c" in available() and native() is not None else from_onnx(m)
    for i in range(5):
        x = np.arange(6, dtype=np.float32).reshape(2, 3) + i
        x.flags.writeable = False
        feeds = {"x": x}
        np.testing.assert_array_equal(model.run(feeds)["y"], x.T)
        assert list(feeds) == ["x"] and feeds["x"] is x
