#!/usr/bin/env bash
# A prepared device check for cudahf (not run yet): two questions TestHFH200Calibration leaves open.
#  1. The steady step's max_memory_reserved is 3-13 % above memsh's in hf.jsonl, where step 1's is within
#     1 %: is it the segments step 1 leaves? Steps that start with torch.cuda.empty_cache() should land on
#     memsh's steady figure (Llama-3.2-1B bf16 36.63 GB, ckpt 23.24 GB, Qwen3-MoE grouped_mm 29.47 GB).
#  2. PEFT's fp32 adapters: with autocast_adapter_dtype=False the LoRA row should land on memsh's
#     figures without the 6 B per adapter weight (17.92 GB max allocated, 2.43 GiB at start).
#   mkdir -p .oracle && cp tools/oracle/cuda_hf.py tools/oracle/cuda_run_hfcheck.sh .oracle/
#   device run (about 40 s), carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run_hfcheck.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
timeout 150 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_emptycache.jsonl" --deadline-s 110 --empty-cache-steps \
    --cases llama1b_bf16,llama1b_ckpt,qwen3_moe_bf16 2>&1 | grep -v -i warn | tee "$OUT/hfcheck.log"
timeout 90 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_lora_bf16ad.jsonl" --deadline-s 60 \
    --cases llama1b_lora_bf16ad 2>&1 | grep -v -i warn | tee -a "$OUT/hfcheck.log"
ls -la "$OUT"
