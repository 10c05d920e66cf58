#!/usr/bin/env bash
# Prepared in session 25 (issues 19 and 28; not run yet): the cells session 19's moe_frag run
# (sim/testdata/cuda_h200/moe_frag.jsonl, cuda_run_moefrag.sh) left empty, which decide how far
# parallel(expert_spread=) (sim/replay/routing.go) may be read on a real allocator:
#   fixed and routed shapes under expandable_segments (Megatron-LM PR #6429's recipe and moe.sh
#   set it; memsh finds the routed churn tiled there: TestMegatronDeepSeekV3ExpertSpread), and
#   routed shapes without it for 40 steps (session 19's 15 grew the reserve at steps 1, 2, 3 and 13:
#   whether it stops, which memsh's two replayed steps cannot tell).
# Each mode in its own process (PYTORCH_CUDA_ALLOC_CONF is read once); about 1 s a step on an H200,
# under 3 minutes in all.
#   mkdir -p .oracle && cp tools/oracle/moe_frag.py tools/oracle/cuda_run_moefrag_exp.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run_moefrag_exp.sh
# Output: $OUT/moe_frag_exp.jsonl (moe_frag.py's step lines and summaries), $OUT/moe_frag_exp.log.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
for m in fixed routed; do
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 "$HERE/moe_frag.py" --shapes "$m" --steps 15 >> "$OUT/moe_frag_exp.jsonl" 2>>"$OUT/moe_frag_exp.log"
  echo "## $m expandable rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/moe_frag_exp.log"
done
timeout 150 python3 "$HERE/moe_frag.py" --shapes routed --steps 40 >> "$OUT/moe_frag_exp.jsonl" 2>>"$OUT/moe_frag_exp.log"
echo "## routed 40 steps rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/moe_frag_exp.log"
grep summary "$OUT/moe_frag_exp.jsonl"
