#!/usr/bin/env bash
# Prepared, not run (session 21): every device check left open, in one call under the 600 s a command may
# run, most valuable first; a part starts only if its timeout still fits the budget (BUDGET_S, default
# 540 s), so what is cut is the tail. Each part writes its own file under $OUT; run21.log says what ran.
#  1. issue 28 (res29): the one-rank NCCL communicator's 583,008,256 B split by cause (cuda_nccl_comm.py);
#     then (ctx24, session 24) the context's local-memory reservation per SM (cuda_context_sm.py, seconds)
#     and (ttloss24) torchtitan's ChunkedLossWrapper against its hand count (cuda_titan_loss.py, seconds).
#  2. issues 19/20 (gmm29): every kernel and aten op by shape of the profiled HF steps (cuda_run29.sh's call).
#  3. issue 19 (swift29): Megatron-Core's fused cross entropy compiled vs eager, bytes per logit (cuda_fused_ce.py).
#  4. issue 19 (moon29): FlashAttention at head dim 128 vs 192 and Megatron's packed RoPE host time (cuda_mla_attn.py).
#  5-. session 20's cuda_run20.sh parts, in the order their issues need them: the three transformers loss eras
#     (cuda_shift_loss.py), grouped_mm's kernels (--set moe), PEFT's LoRA branch (--set lora), the loop at 16
#     experts and its host split, the bf16-built checkpointed reserve, FSDP2 accumulation and empty_cache, the
#     broadcast/rope/RMSNorm kernels.
#   mkdir -p .oracle && cp tools/oracle/cuda_hf.py tools/oracle/cuda_bwd_kernels.py tools/oracle/cuda_loop_host.py \
#       tools/oracle/cuda_fsdp1.py tools/oracle/cuda_shift_loss.py tools/oracle/cuda_nccl_comm.py \
#       tools/oracle/cuda_fused_ce.py tools/oracle/megatron_ce_steps.py tools/oracle/cuda_mla_attn.py \
#       tools/oracle/cuda_context_sm.py tools/oracle/cuda_titan_loss.py tools/oracle/cuda_run21.sh .oracle/
#   device run, carry [".oracle"], timeout_s 590:  OUT=$OUT bash .oracle/cuda_run21.sh
# Then: record every figure in sim/testdata/cuda_h200 (README.md there) and as tests, with this command.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/run21.log"
start=$(date +%s)
budget=${BUDGET_S:-540}
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv > "$log" 2>&1

# part NAME TIMEOUT CMD...: runs CMD under TIMEOUT seconds if that still fits the budget.
part() {
  local name=$1 t=$2
  shift 2
  local used=$(( $(date +%s) - start ))
  if (( used + t > budget )); then
    echo "== $name skipped: ${used} s used, ${t} s more would pass the ${budget} s budget" >> "$log"
    return
  fi
  echo "== $name (timeout ${t} s, at ${used} s)" >> "$log"
  timeout "$t" "$@" 2>&1 | grep -v -i warn >> "$log"
}

part nccl_comm 90 python3 "$HERE/cuda_nccl_comm.py" --out "$OUT/nccl_comm.jsonl" --logs "$OUT/nccl_logs"
part context_sm 45 python3 "$HERE/cuda_context_sm.py" --out "$OUT/context_sm.jsonl"
part titan_loss 60 python3 "$HERE/cuda_titan_loss.py" --out "$OUT/titan_loss.jsonl"
part hf_profile_ops 150 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_profile_ops.jsonl" --deadline-s 120 --profile \
    --profile-top 400 --profile-ops 300 --cases qwen3_moe_bf16,qwen3_06b_bf16,mixtral_bf16,llama1b_bf16
part fused_ce 150 python3 "$HERE/cuda_fused_ce.py" --out "$OUT/fused_ce.jsonl"
part mla_attn 90 python3 "$HERE/cuda_mla_attn.py" --out "$OUT/mla_attn.jsonl"
part shift_loss 60 python3 "$HERE/cuda_shift_loss.py" --out "$OUT/shift_loss.jsonl"
part bwd_moe 90 python3 "$HERE/cuda_bwd_kernels.py" --set moe --out "$OUT/bwd_moe.jsonl" --deadline-s 60
part bwd_lora 90 python3 "$HERE/cuda_bwd_kernels.py" --set lora --out "$OUT/bwd_lora.jsonl" --deadline-s 60
part loop_host16 120 python3 "$HERE/cuda_loop_host.py" --parts loop --experts 16 --out "$OUT/loop_host16.jsonl"
part loop_host 150 python3 "$HERE/cuda_loop_host.py" --out "$OUT/loop_host.jsonl" --deadline-s 120
part hf_bf16build 90 python3 "$HERE/cuda_hf.py" --out "$OUT/hf_bf16build.jsonl" --deadline-s 70 --bf16-build \
    --empty-cache-steps --segments --cases llama1b_ckpt,llama1b_bf16
for b in 2 4; do
  part "fsdp1_accum b$b" 60 python3 "$HERE/cuda_fsdp1.py" --out "$OUT/fsdp1_accum.jsonl" --batches $b --grad-accum 2 --port 2952$b
  part "fsdp1_emptycache b$b" 60 python3 "$HERE/cuda_fsdp1.py" --out "$OUT/fsdp1_emptycache.jsonl" --batches $b --empty-cache --port 2953$b
done
part bwd_broadcast 90 python3 "$HERE/cuda_bwd_kernels.py" --set broadcast --out "$OUT/bwd_broadcast.jsonl" --deadline-s 60
echo "== done at $(( $(date +%s) - start )) s" >> "$log"
ls -la "$OUT" >> "$log"
