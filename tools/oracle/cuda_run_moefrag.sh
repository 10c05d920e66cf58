#!/usr/bin/env bash
# Run in session 19 (sim/testdata/cuda_h200/README.md; issue 19): moe_frag.py's three shape modes on one GPU, each in its own process, and
# the packed mode again under expandable_segments (moe.sh sets it). About 1 s a step on an H200.
#   mkdir -p .oracle && cp tools/oracle/moe_frag.py tools/oracle/cuda_run_moefrag.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run_moefrag.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
STEPS="${STEPS:-20}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
for m in fixed routed packed; do
  timeout 150 python3 "$HERE/moe_frag.py" --shapes "$m" --steps "$STEPS" >> "$OUT/moe_frag.jsonl" 2>>"$OUT/moe_frag.log"
  echo "## $m rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/moe_frag.log"
done
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 "$HERE/moe_frag.py" --shapes packed --steps "$STEPS" >> "$OUT/moe_frag.jsonl" 2>>"$OUT/moe_frag.log"
echo "## packed expandable rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/moe_frag.log"
grep summary "$OUT/moe_frag.jsonl"
