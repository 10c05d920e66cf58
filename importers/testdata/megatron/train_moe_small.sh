#!/bin/bash
# A small Megatron-LM MoE launch written for memsh's tests: DeepSeek-style
# layers (a dense first layer, then MoE with a shared expert and sigmoid
# routing with the expert bias) on 8 GPUs, tp 2 with whole experts
# (--expert-tensor-parallel-size 1) over ep 2, the alltoall dispatcher.
MOE_ARGS=(
    --num-experts 8
    --moe-layer-freq '([0]*1+[1]*3)'
    --moe-ffn-hidden-size 256
    --moe-shared-expert-intermediate-size 512
    --moe-router-topk 2
    --moe-router-score-function sigmoid
    --moe-router-enable-expert-bias
    --moe-router-bias-update-rate 1e-3
    --moe-router-load-balancing-type seq_aux_loss
    --moe-aux-loss-coeff 1e-4
    --moe-router-dtype fp32
    --moe-grouped-gemm
    --moe-permute-fusion
    --moe-token-dispatcher-type alltoall
    --expert-model-parallel-size 2
    --expert-tensor-parallel-size 1
)
torchrun --nproc_per_node 8 pretrain_gpt.py \
    --num-layers 4 --hidden-size 1024 --ffn-hidden-size 2816 --num-attention-heads 8 --swiglu \
    --disable-bias-linear --normalization RMSNorm --position-embedding-type rope \
    --hidden-dropout 0 --attention-dropout 0 --untie-embeddings-and-output-weights \
    --seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000 \
    --micro-batch-size 1 --global-batch-size 32 --bf16 \
    --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer \
    --overlap-grad-reduce --overlap-param-gather \
    "${MOE_ARGS[@]}"
