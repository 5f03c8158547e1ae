"""A `target=` pass option naming no registered target is a PipelineError at that option when the pipeline text is
parsed (not an error at the IR when the pass runs); before uopir.backends is imported the device targets are not
registered yet, and the message says so."""
from __future__ import annotations

import subprocess
import sys

import pytest

import uopir.backends  # noqa: F401  (registers the device targets)
from uopir.ir.diagnostics import IRError
from uopir.passes.manager import PassManager
from uopir.passes.target import UnknownTargetError, check_target_option


def test_check_target_option_names_the_option() -> None:
    check_target_option("c")
    with pytest.raises(UnknownTargetError, match=r"unknown target 'cpo'; known targets: c, cpu.*did you mean 'cpu'") \
            as e:
        check_target_option("cpo")
    assert e.value.option == "target"  # type: ignore[attr-defined]


def test_unknown_target_is_located_at_its_option_at_parse_time() -> None:
    with pytest.raises(IRError) as e:
        PassManager.parse("canonicalize,kernel-to-device{target=tpux}")
    assert str(e.value).startswith("<pipeline>:1:31: error: pass 'kernel-to-device': unknown target 'tpux'; ")
    assert "not yet" not in str(e.value)


def test_before_uopir_backends_is_imported_the_message_says_so() -> None:
    code = ("from uopir.passes.manager import PassManager\n"
            "try:\n    PassManager.parse('default{target=c}')\nexcept Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("<pipeline>:1:9: error: pipeline 'default': unknown target 'c'; known targets: cpu, gpu (a "
                          "device's target is registered when uopir.backends is imported; it is not yet)"), out
