#!/usr/bin/env bash
# One prepared run for a machine with an NVIDIA GPU (issue 11, "On a GPU"): the differential suite on the cuda
# backend, the CUDA backend's tests, the gpu lowering's tests, and the cuda matmul / elementwise figures beside numpy
# and the gpu-lowering figures (a long sum, softmax rows). Each step has its own time limit; the whole script stays
# under TOTAL seconds (default 540) and prints one summary line per step at the end.
#
#   bash bench/gpu_check.sh            # from the repository root, after `make install` (or with .venv present)
#   TOTAL=300 bash bench/gpu_check.sh  # a shorter budget: the later steps get less time
#
# Needs pycuda (pip install '.[cuda]', which builds against the CUDA toolkit) and NVRTC or nvcc.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
TOTAL=${TOTAL:-540}
START=$(date +%s)
SUMMARY=()

left() { echo $(( TOTAL - ($(date +%s) - START) )); }

step() {  # step NAME SECONDS COMMAND...: run with a limit (at most what is left), remember its last line
    local name=$1 limit=$2; shift 2
    local rest; rest=$(left)
    (( limit > rest )) && limit=$rest
    if (( limit < 10 )); then SUMMARY+=("$name: skipped (time budget spent)"); return; fi
    echo "=== $name (limit ${limit}s)"
    local log; log=$(mktemp)
    timeout "$limit" "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    SUMMARY+=("$name: rc=$rc $(grep -E 'passed|failed|error|gflops|gbps' "$log" | tail -1)")
    rm -f "$log"
}

"$PY" - <<'PYEOF'
from uopir.backends.registry import get_backend
be = get_backend("cuda")
print("cuda available:", be.available, be.reason if not be.available else "")
if be.available:
    t = be.target
    print(f"cuda target: threads/block={t.max_threads_per_block} block dims={t.max_local_dims} "
          f"shared bytes={t.local_bytes} warp={t.warp_size}")
PYEOF

step "differential suite (cuda)" 240 env UOPIR_DEVICE=cuda "$PY" -m pytest -q -x -k cuda unit_tests/test_differential.py
step "cuda backend tests" 90 "$PY" -m pytest -q unit_tests/test_cuda_backend.py
step "gpu lowering tests" 60 "$PY" -m pytest -q unit_tests/test_gpu_lowering.py
step "cuda figures" 150 "$PY" bench/gpu_figures.py cuda

echo "=== summary ($(( $(date +%s) - START ))s)"
printf '%s\n' "${SUMMARY[@]}"
