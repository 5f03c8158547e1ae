"""ONNX's own backend node tests (onnx 1.23: 1,884), generated at test time from the onnx package's case generators
into the uopir cache folder (keyed by the onnx and numpy versions; ~15 s the first time) and run through
`uopir.onnx` on the default device (`make test`: the python reference device) with ONNX's tolerances (rtol 1e-3,
atol 1e-7; bfloat16 at least two ulps, as onnx's runner), outputs in their own dtype (sequences element by element;
random operators' outputs by dtype, shape and support: see conformance.RANDOM_OPS). Prints one summary line
(passed / failed / skipped by reason) and writes the per-operator table next to the data
(`<cache>/onnx-node-tests/report-<device>.md`).

A case counts as skipped only when the importer rejects it with its clear OnnxImportError (an unsupported operator,
dtype or type); every other error and every wrong value is a failure, and the test fails on any failure that is not
in KNOWN_FAILURES below (each entry a bug, with its reason). An entry that passes again fails the test too, so the
list only shrinks.
"""
from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from uopir.onnx import conformance  # noqa: E402
from uopir.onnx.importer import default_device  # noqa: E402

# name -> why it fails (each one a bug to fix; keep this list short)
_HALF_ATTN = ("Attention in float16: one-ulp differences from onnx's reference, which rounds every intermediate "
              "(exp, the softmax sum, the matmul) to the half type; uopir computes in float32 and rounds once, and a "
              "half ulp is above rtol 1e-3 (bfloat16 outputs pass: onnx's runner allows them two bfloat16 ulps)")
_HALF_EXPANDED = ("the same float16 rounding in the _expanded graph (Softmax, MatMul on float16: uopir accumulates in "
                  "float32, numpy's reference in the half type)")
KNOWN_FAILURES: dict[str, str] = {
    "test_attention_4d_causal_fp16": _HALF_ATTN,
    **{f"test_attention_{n}_expanded": _HALF_EXPANDED for n in ("4d_fp16", "4d_gqa_with_past_and_present_fp16")},
    **{n: "inverse DFT of a real-valued result: the reference's float32 FFT leaves 1.9e-7 in imaginary parts that are "
          "0 (uopir's float64 DFT gives ~3e-15), above atol 1e-7" for n in ("test_dft_inverse",
                                                                             "test_dft_inverse_opset19")},
}

# Fewer passes than this means an importer regression (or a changed onnx version: then update it): the count on the
# python device with onnx 1.23.2 when this was written (1,843: with the 164 float8/float4/int4/int2 cases, the 44
# sequence / optional / random ones, the bfloat16 Attention cases and TfIdfVectorizer's 7).
MIN_PASSED = 1843


def test_onnx_node_conformance(capsys: pytest.CaptureFixture[str]) -> None:
    folder = conformance.generate()
    device = default_device()
    results = conformance.run_all(folder, device, jobs=1, timeout_s=120)
    report = folder.parent / f"report-{device}.md"
    report.write_text(conformance.table(results, device))
    with capsys.disabled():
        print(f"\n{conformance.summary_line(results, device)} (table: {report})")
    failed = {r.name: r.reason for r in results if r.status == "failed"}
    new = {n: r for n, r in failed.items() if n not in KNOWN_FAILURES}
    fixed = sorted(n for n in KNOWN_FAILURES if n not in failed)
    assert not new, "ONNX node tests failing:\n" + "\n".join(f"  {n}: {r[:300]}" for n, r in sorted(new.items()))
    assert not fixed, f"known failures that pass now (remove them from KNOWN_FAILURES): {fixed}"
    # a skip is only the importer's clear rejection: its reason names what is unsupported
    skipped = [r for r in results if r.status == "skipped"]
    assert all(r.reason for r in skipped)
    # the only element type still rejected is string (float8, float4, int4 and int2 are held wider: onnx/lowp.py)
    dtype_skips = {r.reason for r in skipped if r.reason.startswith("unsupported dtype")}
    assert dtype_skips <= {"unsupported dtype string"}, dtype_skips
    passed = sum(r.status == "passed" for r in results)
    assert passed >= MIN_PASSED, f"only {passed} ONNX node tests pass (was {MIN_PASSED})"
    assert len(results) >= 1800  # the whole suite ran (onnx 1.23 has 1,884 node tests)
