#!/usr/bin/env bash
# Prepared, not run: the device checks session 19 left open (loans paused after its third run). About
# 9 minutes on an H200; each part bounded, each writes its own file under $OUT.
#  1. issue 28 (reserve2): the checkpointed Llama-1B's empty-cache reserve +6.3 %: is it the script's fp32
#     build cast to bf16 (a 1,002 MiB segment holding bf16 parameters)? Built directly in bf16 here.
#  2. issue 20 (bwdprice, hfstep): broadcast multiplies, HF RMSNorm and rope at Qwen3-0.6B's shapes.
#  3. issue 20 (hfstep): host time per small op, per sync and per backward node; the per-expert loop split;
#     the loop again with 16 experts, whose difference from 32 is the aten ops of a pass (sim/nn/moe_loop.go).
#  4. issue 28 (fsdpwarm): FSDP2 on one GPU with gradient accumulation 2 and with empty_cache each step,
#     one batch size per process (no earlier model's stream pools cached).
#  5. issue 20 (peft28, session 20): PEFT's LoRA branch with fp32 and bf16 adapters kernel by kernel at the
#     Llama-3.2-1B LoRA step's shapes (TestHFH200StepTime's LoRA row, -11.2 %: rank-16 fp32 SIMT GEMMs).
#  6. issue 28 (res28, session 20): the three transformers eras' causal-LM loss with the output kept, to the
#     byte against TestShiftLogits (cuda_shift_loss.py).
#  7. issue 20 (gmm20, session 20): grouped_mm's masked_fill by an [S, 1] mask and its clone, and silu(gate) * up
#     on chunk(2) views vs contiguous, at the small Qwen3-MoE's shapes (cuda_bwd_kernels.py --set moe).
#   mkdir -p .oracle && cp tools/oracle/cuda_hf.py tools/oracle/cuda_bwd_kernels.py tools/oracle/cuda_loop_host.py \
#       tools/oracle/cuda_fsdp1.py tools/oracle/cuda_shift_loss.py tools/oracle/cuda_run20.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run20.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/run20.log"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv > "$log" 2>&1
timeout 90 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_bf16build.jsonl" --deadline-s 70 --bf16-build --empty-cache-steps \
    --segments --cases llama1b_ckpt,llama1b_bf16 2>&1 | grep -v -i warn >> "$log"
timeout 90 python3 "$HERE/cuda_bwd_kernels.py" --set broadcast --out "$OUT/bwd_broadcast.jsonl" --deadline-s 60 >> "$log" 2>&1
timeout 150 python3 "$HERE/cuda_loop_host.py" --out "$OUT/loop_host.jsonl" --deadline-s 120 2>&1 | grep -v -i warn >> "$log"
timeout 120 python3 "$HERE/cuda_loop_host.py" --parts loop --experts 16 --out "$OUT/loop_host16.jsonl" 2>&1 | grep -v -i warn >> "$log"
for b in 2 4; do
  timeout 60 python3 "$HERE/cuda_fsdp1.py" --out "$OUT/fsdp1_accum.jsonl" --batches $b --grad-accum 2 --port 2952$b 2>&1 \
      | grep -v -i warn >> "$log"
  timeout 60 python3 "$HERE/cuda_fsdp1.py" --out "$OUT/fsdp1_emptycache.jsonl" --batches $b --empty-cache --port 2953$b 2>&1 \
      | grep -v -i warn >> "$log"
done
timeout 90 python3 "$HERE/cuda_bwd_kernels.py" --set lora --out "$OUT/bwd_lora.jsonl" --deadline-s 60 >> "$log" 2>&1
timeout 90 python3 "$HERE/cuda_bwd_kernels.py" --set moe --out "$OUT/bwd_moe.jsonl" --deadline-s 60 >> "$log" 2>&1
timeout 60 python3 "$HERE/cuda_shift_loss.py" --out "$OUT/shift_loss.jsonl" 2>&1 | grep -v -i warn >> "$log"
ls -la "$OUT" >> "$log"
