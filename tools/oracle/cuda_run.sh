#!/usr/bin/env bash
# One prepared device run (run 1 of 2026-12-04, sim/testdata/cuda_h200): from a copy of ../shared/oracle
# with this file as run_all.sh and tools/oracle/cuda_extra.py as extra.py:
#   cp -r ../shared/oracle .oracle && cp tools/oracle/cuda_extra.py .oracle/extra.py && cp tools/oracle/cuda_run.sh .oracle/run_all.sh
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/run_all.sh
# It runs: extra.py context (fresh process), measure.py --suite cuda, extra.py kernels,
# extra.py compile; each bounded by `timeout` so the whole run ends inside ~480 s.
#   OUT=dir bash oracle/run_all.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 60 python3 "$HERE/extra.py" context --out "$OUT/extra.jsonl" 2>&1 | tee "$OUT/extra.log"
echo "## context done at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/extra.log"
OUT="$OUT" MAX_TOTAL_S="${MAX_TOTAL_S:-190}" timeout 260 bash "$HERE/run_cuda.sh"
echo "## suite rc=$? done at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/extra.log"
timeout 90 python3 "$HERE/extra.py" kernels --out "$OUT/extra.jsonl" --deadline-s 70 2>&1 | tee -a "$OUT/extra.log"
echo "## kernels done at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/extra.log"
timeout 120 python3 "$HERE/extra.py" compile --out "$OUT/extra.jsonl" --deadline-s 100 2>&1 | tee -a "$OUT/extra.log"
echo "## compile done at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/extra.log"
ls -la "$OUT"
