"""Every registry takes a name once: a second registration from another line is an error naming both lines,
`replace=True` redefines, the same line again (a module reload) replaces quietly; a registered backend is a Tensor
device; `register_handler` teaches the reference interpreter a new op."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from uopir.backends.python.interpreter import TABLE, evaluate, register_handler
from uopir.backends.registry import DEVICES, register_backend, unregister_backend
from uopir.dialects import core as C
from uopir.ir.dtype import dtypes
from uopir.ir.folds import declare_folds, folds_of
from uopir.ir.ops import REGISTRY, def_op
from uopir.ir.parser import parse_ir
from uopir.ir.registration import RegistrationError
from uopir.ir.upat import UPat
from uopir.passes.registry import PASSES, register_pass
from uopir.passes.target import CPU, register_target, target

f32 = dtypes.float32
HERE = __file__.rsplit("/", 1)[-1]


def _twice(register, *args, **kw) -> None:
    """Register, then register again from another line."""
    register(*args, **kw)
    register(*args, **kw)


def test_a_second_op_names_both_lines_and_replace_redefines() -> None:
    first = def_op("testreg.one", 1, summary="first")
    try:
        with pytest.raises(RegistrationError, match=rf"op 'testreg.one' is already registered \(at .*{HERE}:\d+\); "
                                                    rf"registered again at .*{HERE}:\d+: pass replace=True"):
            def_op("testreg.one", 1, summary="second")
        again = def_op("testreg.one", 2, summary="second", replace=True)
        assert REGISTRY["testreg.one"] is again and again is not first and again.n_src == (2, 2)
    finally:
        REGISTRY.pop("testreg.one")


def test_the_same_line_again_is_a_reload_and_replaces() -> None:
    ops = [def_op("testreg.reload", 0, summary=str(i)) for i in range(2)]
    try:
        assert REGISTRY["testreg.reload"] is ops[1]
    finally:
        REGISTRY.pop("testreg.reload")


def test_a_bad_op_declaration_is_an_error_also_under_python_O() -> None:
    code = ("from uopir.ir.ops import def_op\n"
            "try:\n    def_op('nodialect', 0)\nexcept ValueError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "refused: op name 'nodialect' must be dialect.mnemonic"


def test_folds_passes_targets_backends_refuse_a_second_registration() -> None:
    op = def_op("testreg.f", 1, summary="a fold's op")
    try:
        row = (UPat(op, src=(UPat.var("x"),)), lambda x: x, "testreg-f-identity")
        with pytest.raises(RegistrationError, match="fold 'testreg-f-identity' is already registered"):
            _twice(declare_folds, row)
        declare_folds(row, replace=True)
        assert [f.name for f in folds_of(["testreg"])] == ["testreg-f-identity"]

        with pytest.raises(RegistrationError, match="pass 'test-reg-p' is already registered"):
            for _ in range(2):
                register_pass("test-reg-p")(lambda r, o, c: r)  # one line: a reload...
            register_pass("test-reg-p")(lambda r, o, c: r)  # ...but not this one
        with pytest.raises(RegistrationError, match="target 'test-reg-t' is already registered"):
            _twice(register_target, CPU.derive(name="test-reg-t"))
        register_target(CPU.derive(name="test-reg-t", threads=3), replace=True)
        assert target("test-reg-t").threads == 3
    finally:
        REGISTRY.pop("testreg.f")
        PASSES.pop("test-reg-p", None)


def test_a_registered_backend_is_a_tensor_device() -> None:
    from uopir.backends.python import PythonBackend
    from uopir.frontend.tensor import Tensor

    class Echo(PythonBackend):
        device = "test-echo"

    with pytest.raises(ValueError, match="unknown device 'test-echo'"):
        Tensor([1.0], device="test-echo")
    register_backend("test-echo", Echo)
    register_target(CPU.derive(name="test-echo"), replace=True)
    try:
        t = Tensor([1.0, 2.0], device="test-echo") * 3
        assert t.device == "test-echo" and "test-echo" in DEVICES
        assert t.numpy().tolist() == [3.0, 6.0]
    finally:
        unregister_backend("test-echo")
    assert "test-echo" not in DEVICES


def test_register_handler_teaches_the_interpreter_an_op() -> None:
    op = def_op("testreg.relu6", 1, shape=lambda u: u.src[0].shape, summary="min(max(x, 0), 6)")
    try:
        src = ('%0 = tensor.buffer {id = 0, device = "python"} : tensor<3xf32>\n'
               '%1 = testreg.relu6 %0 : tensor<3xf32>\n')
        root = parse_ir(src)
        data = {0: np.array([-1.0, 3.0, 9.0], np.float32)}
        with pytest.raises(Exception, match="no handler for testreg.relu6"):
            evaluate(root, data)
        register_handler(op, lambda u, s, ctx: np.clip(s[0], 0, 6))
        assert evaluate(root, data).tolist() == [0.0, 3.0, 6.0]
        with pytest.raises(RegistrationError, match=r"\(graph level\) of op 'testreg.relu6' is already"):
            register_handler(op, lambda u, s, ctx: s[0])
        with pytest.raises(RegistrationError, match="unknown interpreter level 'device'"):
            register_handler(op, lambda u, s, ctx: s[0], levels=("device",))
    finally:
        REGISTRY.pop("testreg.relu6")
        TABLE.pop(op, None)


def test_a_builtin_pass_name_is_taken_before_its_module_loads() -> None:
    code = ("from uopir.passes.registry import register_pass\n"
            "try:\n    register_pass('dce')(lambda r, o, c: r)\nexcept ValueError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    line = _line_of("uopir/passes/core.py", '@register_pass("dce"')
    assert out == (f"pass 'dce' is already registered (at uopir/passes/core.py:{line}); registered again at "
                   "<string>:3: pass replace=True to redefine it\n")


def _line_of(path: str, text: str) -> int:
    lines = (Path(__file__).resolve().parent.parent / path).read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if text in ln)


def test_a_builtin_op_cannot_be_silently_redefined() -> None:
    with pytest.raises(RegistrationError, match=r"op 'core.add' is already registered \(at .*dialects"):
        def_op("core.add", 2)
    assert REGISTRY["core.add"] is C.ADD
    assert C.ADD in TABLE
