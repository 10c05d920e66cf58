#!/usr/bin/env bash
# Prepared, not run (session 21, gmm29): issues 19/20, the HF steps' kernels family by family. The
# profiled steps of hf_profile.jsonl list their 25 longest kernels only, so TestHFH200KernelFamilies
# (sim/calib_hf_h200_kernels_test.go) can set only those families against memsh; this run lists every
# kernel of the profiled step (--profile-top 400) and its aten ops by input shape with their self device
# time (--profile-ops 300: which op launched which kernel, at which shape), for the grouped_mm Qwen3-MoE,
# Qwen3-0.6B, the small Mixtral and Llama-3.2-1B. About 1 minute on one H200 (the four cases took 3.1, 5.7,
# 2.5 and 10.3 s in run 19; record_shapes adds host time, not kernel time).
#   mkdir -p .oracle && cp tools/oracle/cuda_hf.py tools/oracle/cuda_run29.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run29.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/run29.log"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv > "$log" 2>&1
timeout 150 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_profile_ops.jsonl" --deadline-s 120 --profile \
    --profile-top 400 --profile-ops 300 --cases qwen3_moe_bf16,qwen3_06b_bf16,mixtral_bf16,llama1b_bf16 \
    2>&1 | grep -v -i warn >> "$log"
ls -la "$OUT" >> "$log"
