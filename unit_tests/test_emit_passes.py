"""The emit-<lang> passes are one factory (uopir.backends.codegen.emit.emit_pass): every device with a renderer has
its pass, built by the factory, and the pass's device.sources hold exactly what calling the renderer gives; a new
language is one call (its errors located and named like the others')."""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.codegen.emit import EMITTERS, emit_pass
from uopir.backends.emit import programs
from uopir.backends.registry import DEVICES, get_backend
from uopir.dialects import device as D
from uopir.ir.diagnostics import IRError
from uopir.ir.uop import UOp
from uopir.passes.manager import PassManager
from uopir.passes.registry import PASSES, load_passes


def _direct() -> dict[str, list[tuple[str, object]]]:
    """language -> (pass options text, the renderer called directly: program -> (kernel name, text)) per variant."""
    from uopir.backends.c.renderer import CRenderer
    from uopir.backends.c.renderer import kernel_signature as c_sig
    from uopir.backends.cuda.language import CUDA
    from uopir.backends.gpu.renderer import GpuRenderer, kernel_name
    from uopir.backends.llvm.renderer import LLVMRenderer
    from uopir.backends.llvm.renderer import kernel_signature as llvm_sig
    from uopir.backends.opencl.language import OPENCL

    def c(r):
        return lambda p: (c_sig(p).name, r.render(p))

    def llvm(r):
        return lambda p: (llvm_sig(p).name, r.render(p))

    def gpu(lang):
        return lambda p: (kernel_name(p, lang), GpuRenderer(lang).render(p))
    return {"c": [("", c(CRenderer())), ("{restrict=false}", c(CRenderer(restrict=False)))],
            "llvm": [("", llvm(LLVMRenderer())), ("{noalias=false}", llvm(LLVMRenderer(noalias=False)))],
            "opencl": [("", gpu(OPENCL))], "cuda": [("", gpu(CUDA))]}


TARGET = {"c": "c", "llvm": "llvm", "opencl": "gpu", "cuda": "gpu"}  # a lowering each language renders


def _lowered(target: str) -> UOp:
    """A graph of two kernels (a matmul-relu-sum, an exp) lowered for `target`."""
    a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="python")
    b = Tensor(np.ones((4, 5), dtype=np.float32), device="python")
    root = UOp.sink(((a @ b).relu() + 1).sum(axis=1).uop, (a * 0.5).exp().uop)
    return PassManager.parse(f"default{{target={target}}}").run(root)


def _sources(out: UOp) -> list[tuple[str, str, str]]:
    assert out.op is UOp.sink().op and all(s.op is D.SOURCE for s in out.src)
    return [tuple(s.arg) for s in out.src]


def _rendering_devices() -> dict[str, str]:
    """device -> the language of its renderer, for every device that has one."""
    return {d: get_backend(d).renderer.language for d in DEVICES if get_backend(d).renderer is not None}


def test_every_device_with_a_renderer_has_the_factorys_emit_pass():
    load_passes()
    langs = set(_rendering_devices().values())
    assert langs, "no device has a renderer"
    for lang in langs:
        assert lang in EMITTERS, f"no emit_pass for the language of a device: {lang}"
        assert PASSES[f"emit-{lang}"].fn is EMITTERS[lang].fn
    # and every emit-<lang> pass is the factory's (none registered by hand)
    assert {n for n in PASSES if n.startswith("emit-")} == {e.pass_name for e in EMITTERS.values()}
    assert set(_direct()) == langs  # this test renders each language directly below


@pytest.mark.parametrize("lang", sorted(TARGET))
def test_emit_pass_holds_what_the_renderer_renders(lang):
    assert lang in _rendering_devices().values()
    low = _lowered(TARGET[lang])
    progs = programs(low)
    assert len(progs) == 2
    for opts, direct in _direct()[lang]:
        got = _sources(PassManager.parse(f"emit-{lang}{opts}").run(low))
        want = [(lang, *direct(p)) for p in progs]
        assert got == want
        assert all(text.strip() and name in text for _, name, text in got)
    if len(_direct()[lang]) > 1:  # the option reaches the renderer: its variants differ
        texts = {PassManager.parse(f"emit-{lang}{o}").run(low).src[0].arg[2] for o, _ in _direct()[lang]}
        assert len(texts) == len(_direct()[lang])


def test_emit_mlir_holds_the_exported_module():
    pytest.importorskip("xdsl")
    from uopir.backends.mlir.export import export_text

    low = _lowered("c")
    for opts, generic in (("", False), ("{generic=true}", True)):
        got = _sources(PassManager.parse(f"emit-mlir{opts}").run(low))
        assert got == [("mlir", "module", export_text(low, generic))]
    assert EMITTERS["mlir"].one_module and PASSES["emit-mlir"].fn is EMITTERS["mlir"].fn


@pytest.fixture
def new_language():
    """Registers the toy language `zz` through the factory (its pass and emitter removed after)."""
    yield "zz"
    PASSES.pop("emit-zz", None)
    EMITTERS.pop("zz", None)


def test_a_new_language_is_one_call(new_language):
    def zz_render(options):
        return lambda p: (p.arg[0] if isinstance(p.arg, tuple) else "k", f"zz {len(p.src)} operands\n")

    fn = emit_pass("zz", zz_render, what="zz text")
    assert PASSES["emit-zz"].fn is fn and EMITTERS["zz"].fn is fn
    assert PASSES["emit-zz"].summary == ("replace the graph by one device.source of zz text per device.program "
                                         "(what uop-opt --emit=zz prints)")
    low = _lowered("c")
    got = _sources(PassManager.parse("emit-zz").run(low))
    assert [(lang, text) for lang, _, text in got] == [("zz", f"zz {len(p.src)} operands\n") for p in programs(low)]
    # a graph with no program: the located error names the pass and the lowering to run
    unlowered = UOp.sink(Tensor(np.ones(3, dtype=np.float32), device="python").exp().uop)
    with pytest.raises(IRError, match=r"emit-zz: the graph has no device.program \(lower it first, e.g. with -p "
                                      r"'default\{target=zz\}'\)"):
        PassManager.parse("emit-zz").run(unlowered)


def test_a_missing_optional_package_is_a_located_error(new_language):
    def zz_render(options):
        import uopir_no_such_package  # noqa: F401

    emit_pass("zz", zz_render, what="zz text", needs=("the zz kit", "pip install zz"))
    with pytest.raises(IRError) as e:
        PassManager.parse("emit-zz").run(_lowered("c"))
    msg = str(e.value.diagnostics[0].message)
    assert msg == "emit-zz needs the zz kit (No module named 'uopir_no_such_package'): pip install zz"
