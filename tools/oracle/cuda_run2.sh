#!/usr/bin/env bash
# Device run 2 of 2026-12-04 (sim/testdata/cuda_h200): whole Hugging Face models (cuda_hf.py) and PyG's
# message-passing kernels at Bris's shapes (graph_kernels.py), on one H200.
#   mkdir -p .oracle && cp tools/oracle/cuda_hf.py tools/oracle/graph_kernels.py tools/oracle/cuda_run2.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run2.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 220 python3 "$HERE/cuda_hf.py" --out "$OUT/hf.jsonl" --deadline-s 180 2>&1 | grep -v -i warn | tee "$OUT/run2.log"
echo "## hf done at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/run2.log"
timeout 180 python3 "$HERE/graph_kernels.py" --dtypes fp16,bf16,fp32 > "$OUT/graph_kernels.jsonl" 2>>"$OUT/run2.log"
echo "## graph_kernels rc=$? done at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/run2.log"
tail -3 "$OUT/graph_kernels.jsonl"
ls -la "$OUT"
