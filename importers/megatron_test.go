package importers

import "testing"

// TestMegatron imports Megatron-LM's example launch scripts
// (testdata/megatron, the README names their commit), read as bash runs
// them (the pretrain_gpt.py command line after their variables, arrays and
// conditionals), and checks each plan against the one written by hand from
// Megatron's arguments: mcore's GPT layer, the vocabulary padded to 128 x
// tp, GPT-2's BPE vocabulary from --vocab-file, learned positions or rope,
// Megatron's mixed precision (16-bit parameters, fp32 or bf16 main
// gradients, fp32 master weights), the global batch as micro-batches or
// accumulation.
// llama3NotModelled is what the Llama 3 script sets that memsh lists.
var llama3NotModelled = []string{
	"empty-unused-memory-level: torch.cuda.empty_cache() between steps (memsh keeps the allocator's cache)",
}

// llama3Model is the Llama 3 script's model, as written by hand.
const llama3Model = `layer = sequential(
    residual(sequential(layernorm(4096, name = "input_layernorm"),
                        attention(4096, 32, kv_heads = 8, impl = "flash", rope = True, fused_qkv = True, name = "self_attention"))),
    residual(sequential(layernorm(4096, name = "pre_mlp_layernorm"), mlp(4096, 14336, act = "swiglu", name = "mlp"))),
)
gpt = model("gpt", embedding(128256, 4096, name = "embedding"), repeat(layer, 32, name = "decoder.layers"),
            layernorm(4096, name = "final_layernorm"), vocab = 128256)
`

func TestMegatron(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "GPT-3 175B: tp 8 x pp 16 on 128 GPUs, fp16",
		file: "megatron/train_gpt3_175b_distributed.sh",
		step: megatronStep(1536, 2048),
		opts: Options{GPUs: 8, Nodes: 16},
		// Data parallelism of one: no gradient reduction to overlap.
		// Megatron's dropouts at their 0.1 defaults (--hidden-dropout,
		// --attention-dropout): the flash kernel keeps no mask, the
		// bias-dropout-adds and the embedding's dropout a bool each.
		hand: `layer = sequential(
    residual(sequential(layernorm(12288, name = "input_layernorm"),
                        attention(12288, 96, qkv_bias = True, out_bias = True, impl = "flash", fused_qkv = True, dropout = 0.1, name = "self_attention"))),
    residual(sequential(layernorm(12288, name = "pre_mlp_layernorm"), mlp(12288, 4 * 12288, act = "gelu", bias = True, dropout = 0.1, name = "mlp"))),
)
gpt = model("gpt", embedding(51200, 12288, name = "embedding"), add_embedding(2048, 12288, max_seq = 2048, name = "position_embeddings"),
            dropout(0.1, name = "embedding_dropout"),
            repeat(layer, 96, name = "decoder.layers"), layernorm(12288, name = "final_layernorm"), vocab = 51200, tie_embeddings = True)
plan = train(gpt, batch = 1, seq = 2048, precision = precision("megatron", params = "fp16", compute = "fp16"), optimizer = "adamw",
             gpu = "H100-80GB", parallel = parallel(dp = 1, tp = 8, pp = 16, micro_batches = 1536), cluster = cluster(nodes = 16, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "GPT-3 175B on 256 GPUs: dp 2, Megatron's DDP reducing after the backward (no --overlap-grad-reduce)",
		file: "megatron/train_gpt3_175b_distributed.sh",
		step: megatronStep(1536, 2048),
		opts: Options{GPUs: 8, Nodes: 32},
		hand: `layer = sequential(
    residual(sequential(layernorm(12288, name = "input_layernorm"),
                        attention(12288, 96, qkv_bias = True, out_bias = True, impl = "flash", fused_qkv = True, dropout = 0.1, name = "self_attention"))),
    residual(sequential(layernorm(12288, name = "pre_mlp_layernorm"), mlp(12288, 4 * 12288, act = "gelu", bias = True, dropout = 0.1, name = "mlp"))),
)
gpt = model("gpt", embedding(51200, 12288, name = "embedding"), add_embedding(2048, 12288, max_seq = 2048, name = "position_embeddings"),
            dropout(0.1, name = "embedding_dropout"),
            repeat(layer, 96, name = "decoder.layers"), layernorm(12288, name = "final_layernorm"), vocab = 51200, tie_embeddings = True)
plan = train(gpt, batch = 1, seq = 2048, precision = precision("megatron", params = "fp16", compute = "fp16"), optimizer = "adamw",
             gpu = "H100-80GB", parallel = parallel(dp = 2, tp = 8, pp = 16, micro_batches = 768, overlap_grad_reduce = False), cluster = cluster(nodes = 32, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name:        "Llama 3 8B on 8 H100s: bf16 with bf16 gradient reduction, distributed optimizer, Transformer Engine fp8",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB", parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		// Without --overlap-*, Megatron reduces the gradients after the
		// backward and gathers the parameters after the step.
		name:        "Llama 3 8B without the overlap flags",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"overlap-grad-reduce=false", "overlap-param-gather=false"}},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB", parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True, overlap_grad_reduce = False, overlap_param_gather = False), clip_grad_norm = 1.0)`,
	}, {
		// Megatron-Bridge's MXFP8 recipe (bf16_with_mxfp8_mixed): fp8
		// parameters with the gradient buffer reused for their all-gather.
		name:        "Llama 3 8B on B200s with MXFP8 parameters",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, GPU: "B200", Overrides: []string{"fp8-recipe=mxfp8", "reuse-grad-buf-for-mxfp8-param-ag=true"}},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-mxfp8", fp8_param_gather = True, optimizer = "adamw", gpu = "B200", parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "Llama 3 8B with MXFP8 parameters without the shared buffer",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, GPU: "B200", Overrides: []string{"fp8-recipe=mxfp8"}},
		notModelled: append([]string{"fp8-param-gather: MXFP8 parameters without --reuse-grad-buf-for-mxfp8-param-ag (a bf16 param buffer of their own)"}, llama3NotModelled...),
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-mxfp8", optimizer = "adamw", gpu = "B200", parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "Llama 3 8B with blockwise scaling: its fp8 parameters are listed",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"fp8-recipe=blockwise"}},
		notModelled: append([]string{"fp8-param-gather: fp8 parameters with the blockwise recipe (docs/float8.md)"}, llama3NotModelled...),
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-blockwise", optimizer = "adamw", gpu = "H100-80GB", parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "Llama 3 8B with the overrides of a tp 2 run with selective recompute",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(64, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"tensor-model-parallel-size=2", "recompute-activations=true", "global-batch-size=64"}},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", checkpoint = "selective", gpu = "H100-80GB",
             parallel = parallel(dp = 4, tp = 2, sequence_parallel = True, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		// Megatron's loss is the vocabulary-parallel one at tp 1 too
		// (compute_language_model_loss), fused as at tp 2
		name:        "Llama 3 8B with Transformer Engine's fused cross-entropy at tp 1",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"cross-entropy-fusion-impl=te"}},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB", parallel = parallel(dp = 8, loss_parallel = "te", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		// one GPU: the distributed optimizer of one rank is a layout (the
		// fp8 parameters' gather needs it), the fused loss runs in it
		name:        "Llama 3 8B on one GPU: the distributed optimizer of one rank",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 1},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 128, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB",
             parallel = parallel(dp = 1, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		// one GPU without the distributed optimizer: no layout to run the
		// fused loss in (memsh's plain cross-entropy), said
		name: "Llama 3 8B on one GPU without the distributed optimizer: the fused loss said",
		file: "megatron/train_llama3_8b_h100_fp8.sh",
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 1, Overrides: []string{"use-distributed-optimizer=false", "fp8-param-gather=false"}},
		notModelled: append([]string{"cross-entropy-loss-fusion: Megatron's fused loss on one GPU without --use-distributed-optimizer (memsh lowers the plain cross-entropy without a Megatron layout)"},
			llama3NotModelled...),
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 128, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, optimizer = "adamw", gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name:        "the same with Transformer Engine's fused cross-entropy",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(64, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"tensor-model-parallel-size=2", "recompute-activations=true", "global-batch-size=64", "cross-entropy-fusion-impl=te"}},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", checkpoint = "selective", gpu = "H100-80GB",
             parallel = parallel(dp = 4, tp = 2, sequence_parallel = True, loss_parallel = "te", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}})
}

func TestMegatronErrors(t *testing.T) {
	const launch = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000"
	runErrorCases(t, []errorCase{
		{name: "a script that never launches pretrain_gpt.py", file: "run.sh", config: "#!/bin/bash\necho hello\nnum_layers=4\n",
			want: "run.sh: the script never launches pretrain_gpt.py, ms-swift's `swift sft`, `pt` or `rlhf`, or OpenRLHF's openrlhf.cli.train_sft", wantHint: "torchrun"},
		// ms-swift's examples/megatron/lora/dense.sh (modelscope/ms-swift
		// at 3602360), shortened: its own launcher, not pretrain_gpt.py
		{name: "ms-swift's megatron sft", file: "dense.sh",
			config:   "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \\\nNPROC_PER_NODE=2 \\\nmegatron sft \\\n    --model Qwen/Qwen2.5-7B-Instruct \\\n    --tuner_type lora \\\n    --tensor_model_parallel_size 2 \\\n    --micro_batch_size 16\n",
			opts:     Options{Trainer: "megatron"},
			want:     "dense.sh: the script runs ms-swift's `megatron sft`, not pretrain_gpt.py",
			wantHint: `precision="megatron"`},
		{name: "ms-swift's swift sft", file: "sft.sh", config: "CUDA_VISIBLE_DEVICES=0 swift sft --model Qwen/Qwen3-8B --tuner_type lora\n", opts: Options{Trainer: "megatron"},
			want: "sft.sh: the script runs ms-swift's `swift sft`, not pretrain_gpt.py", wantHint: "--trainer swift"},
		// Megatron-LM's examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh
		// at d98e8a6: bash keeps the word, mvdan.cc/sh refuses it
		{name: "a word bash reads and mvdan.cc/sh does not", file: "run.sh", config: "ARGS=(\n    --moe-layer-freq [0]*3+[1]*58\n)\n",
			want: "run.sh:2: memsh's bash reader (mvdan.cc/sh) cannot parse the script: `[x]` must be followed by `=`", wantHint: "quote it ('[0]*3+[1]*58')"},
		{name: "a script bash cannot read", file: "run.sh", config: "if then\n", want: "run.sh:1: memsh's bash reader (mvdan.cc/sh) cannot parse the script: `if` must be followed by a statement list"},
		{name: "a script that exits first", file: "run.sh", config: "exit 3\n" + launch + "\n",
			want: "run.sh: the script never launches pretrain_gpt.py, ms-swift's `swift sft`, `pt` or `rlhf`, or OpenRLHF's openrlhf.cli.train_sft", wantHint: "torchrun"},
		{name: "bash -c in a loop: the commands it runs count", file: "run.sh", config: "while :; do bash -c ':; :; :; :; :; :; :; :; :'; done\n" + launch + "\n",
			want: "run.sh: the script stopped before it launched pretrain_gpt.py: more than 100000 commands", wantHint: "running no command"},
		{name: "a script that loops for ever", file: "run.sh", config: "while :; do :; done\n" + launch + "\n",
			want: "run.sh: the script stopped before it launched pretrain_gpt.py: more than 100000 commands", wantHint: "running no command"},
		{name: "the gloo backend", file: "run.sh", config: launch + " --distributed-backend gloo\n",
			want: "run.sh: key distributed-backend: the gloo backend is not modelled", wantHint: "nccl"},
		{name: "a flag given twice", file: "run.sh", config: launch + " --num-layers 4\n",
			want: "run.sh: key num-layers: given twice: 2 and 4", wantHint: "once"},
		{name: "an unknown fused cross-entropy", file: "run.sh", config: launch + " --tensor-model-parallel-size 2 --cross-entropy-loss-fusion --cross-entropy-fusion-impl fast\n", opts: Options{GPUs: 8},
			want: "run.sh: key cross-entropy-fusion-impl: want native or te, got fast", wantHint: "native"},
		{name: "a dropout that is no probability", file: "run.sh", config: launch + " --hidden-dropout 1.5\n",
			want: "run.sh: key hidden-dropout: want a probability in [0, 1), got 1.5"},
		{name: "an inference layer spec", file: "run.sh", config: launch + " --transformer-impl inference_optimized\n",
			want: "run.sh: key transformer-impl: the inference_optimized layer spec is not modelled", wantHint: "transformer_engine"},
		{name: "block recompute", file: "run.sh", config: launch + " --recompute-granularity full --recompute-method block --recompute-num-layers 2\n",
			want: "run.sh: key recompute-method: block recompute is not modelled", wantHint: "uniform"},
		{name: "model parallelism the GPUs do not divide", file: "run.sh", config: launch + " --tensor-model-parallel-size 3\n", opts: Options{GPUs: 8},
			want: "run.sh: key tensor-model-parallel-size: 8 GPUs do not divide into tp 3 x pp 1 x cp 1", wantHint: "--gpus"},
		{name: "a global batch that does not divide", file: "run.sh", config: launch + " --global-batch-size 12\n", opts: Options{GPUs: 8},
			want: "run.sh: key global-batch-size: 12 is not a multiple of 1 x 8", wantHint: "micro-batch-size"},
		{name: "no vocabulary", file: "run.sh", config: "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --position-embedding-type rope\n",
			want: "run.sh: key vocab-size: missing", wantHint: "--vocab-size N"},
		{name: "a script that changes folder and checks its files under set -e", file: "run.sh",
			config: "set -euo pipefail\ncd \"${MEGATRON:-/opt/megatron}\"\n[ -d data ] || exit 2\n[ -f pretrain_gpt.py ] || exit 3\n" + launch + " --global-batch-size 12\n", opts: Options{GPUs: 8},
			want: "run.sh: key global-batch-size: 12 is not a multiple of 1 x 8", wantHint: "micro-batch-size"},
		{name: "an fp8 recipe Megatron does not have", file: "run.sh", config: launch + " --fp8-format hybrid --fp8-recipe nvfp4\n", opts: Options{GPUs: 8},
			want: "run.sh: key fp8-recipe: unknown recipe nvfp4", wantHint: "delayed, tensorwise, mxfp8 or blockwise"},
		{name: "fp8 parameters without fp8 training", file: "run.sh", config: launch + " --use-distributed-optimizer --fp8-param-gather\n", opts: Options{GPUs: 8},
			want: "run.sh: key fp8-param-gather: Megatron refuses fp8 parameters without fp8 training (fp8_param must be used together with fp8 mode)", wantHint: "--fp8-format"},
		{name: "fp8 parameters without the distributed optimizer", file: "run.sh", config: launch + " --fp8-format hybrid --fp8-param-gather\n", opts: Options{GPUs: 8},
			want: "run.sh: key fp8-param-gather: Megatron asserts --fp8-param-gather only supported with distributed optimizer", wantHint: "--use-distributed-optimizer"},
		{name: "an unknown fp8 format", file: "run.sh", config: launch + " --fp8-format e5m2\n", opts: Options{GPUs: 8},
			want: "run.sh: key fp8-format: unknown format e5m2", wantHint: "e4m3 or hybrid"},
		{name: "a stray argument", file: "run.sh", config: "torchrun pretrain_gpt.py stray --num-layers 2\n",
			want: "run.sh: pretrain_gpt.py argument stray is not a --flag", wantHint: "--flag value"},
	})
}
