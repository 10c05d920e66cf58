#!/usr/bin/env bash
# Session 19's device run (one H200): the questions the open issues left for a GPU.
#  1. issue 28: steps that begin with torch.cuda.empty_cache() (the steady reserve without step 1's
#     segments) and PEFT LoRA with bf16 adapters (cuda_run_hfcheck.sh's two questions);
#  2. issue 28 / 20: the allocator's segments after each step and the last step under torch.profiler
#     (kernel time against wall time, launches, synchronisations) for the HF models of hf.jsonl;
#  3. issue 20: what an add's, a cast's, masked_fill's and softmax's backward launch (cuda_bwd_kernels.py);
#  4. issue 28: two real out-of-memory errors with every number their message prints (cuda_oom.py).
#   mkdir -p .oracle && cp tools/oracle/cuda_hf.py tools/oracle/cuda_bwd_kernels.py tools/oracle/cuda_oom.py \
#       tools/oracle/cuda_run19.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run19.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/run19.log"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv > "$log" 2>&1
timeout 120 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_emptycache.jsonl" --deadline-s 90 --empty-cache-steps \
    --cases llama1b_bf16,llama1b_ckpt,qwen3_moe_bf16 2>&1 | grep -v -i warn >> "$log"
timeout 60 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_lora_bf16ad.jsonl" --deadline-s 40 \
    --cases llama1b_lora_bf16ad 2>&1 | grep -v -i warn >> "$log"
timeout 180 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_profile.jsonl" --deadline-s 140 --segments --profile \
    --cases llama1b_bf16,llama1b_lora,qwen3_06b_bf16,qwen3_moe_bf16,qwen3_moe_loop,llama1b_ckpt,mixtral_bf16 \
    2>&1 | grep -v -i warn >> "$log"
timeout 90 python3 "$HERE/cuda_bwd_kernels.py" --out "$OUT/bwd_kernels.jsonl" --deadline-s 70 >> "$log" 2>&1
timeout 120 python3 "$HERE/cuda_oom.py" --out "$OUT/oom.jsonl" >> "$log" 2>&1
ls -la "$OUT" >> "$log"
