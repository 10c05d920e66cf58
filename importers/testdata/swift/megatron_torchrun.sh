# Megatron-SWIFT's entry point under torchrun (as examples/megatron/multi-node
# runs it with NNODES; here one node of two GPUs), every default but the rows'
torchrun --nproc_per_node 2 swift/cli/_megatron/sft.py \
    --model Qwen/Qwen2.5-14B \
    --dataset 'AI-ModelScope/alpaca-gpt4-data-en' \
    --max_length 4096 \
    --output_dir megatron_output
