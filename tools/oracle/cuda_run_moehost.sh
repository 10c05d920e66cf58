#!/usr/bin/env bash
# Prepared for the lead (issue 19, moe30; not yet run): megatron_moe_host.py on one GPU, the host's time per aten
# op of Megatron-Core's own router and alltoall dispatcher (ep 1: no all-to-all), against memsh's 12.4 us
# (sim/timing/host_ops.go, an average over Hugging Face steps). Megatron-Core is not installed there: carry its
# source, `git archive core_v0.13.0 megatron/core` from a fetch of NVIDIA/Megatron-LM (about 0.7 MB packed):
#   mkdir -p .oracle/mc013 && tar -xzf mc013.tgz -C .oracle/mc013 && cp tools/oracle/megatron_moe_host.py tools/oracle/cuda_run_moehost.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run_moehost.sh
# Under a minute: three router cases, 20 timed calls each, at 512 and 4096 tokens.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
for c in qwen15 qwen3_swift moonlight; do
  for n in 512 4096; do
    timeout 120 python3 "$HERE/megatron_moe_host.py" --mcore "$HERE/mc013" --case "$c" --ep 1 --device cuda \
      --tokens "$n" --hidden 2048 --out "$OUT/moe_host.jsonl" >>"$OUT/moe_host.log" 2>&1
    echo "## $c $n rc=$?" | tee -a "$OUT/moe_host.log"
  done
done
grep -o '"case": "[a-z0-9_]*"\|"tokens": [0-9]*\|"timing": {[^}]*}\|"error": "[^"]\{0,200\}' "$OUT/moe_host.jsonl"
