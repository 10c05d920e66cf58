package importers

import (
	"strings"
	"testing"
)

// TestMegatronPipeline imports the Llama 3 8B script with pipeline
// stages, each split as mcore builds its layers (NVIDIA/Megatron-LM at
// d98e8a6: arguments.py lines 941-1000, transformer_block.py
// get_num_layers_to_build): 8 GPUs as pp 4 x dp 2 (global batch 128: 64
// micro-batches of 1 per pipeline).
func TestMegatronPipeline(t *testing.T) {
	const script = "megatron/train_llama3_8b_h100_fp8.sh"
	head := llama3Model + `plan = train(gpt, batch = 1, seq = 8192, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB",
             parallel = parallel(dp = 2, `
	tail := `, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`
	layers30 := strings.Replace(head, "repeat(layer, 32,", "repeat(layer, 30,", 1)
	runImportCases(t, []importCase{{
		name:        "pp 4: 8 layers a stage",
		file:        script,
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"pipeline-model-parallel-size=4"}},
		notModelled: llama3NotModelled,
		hand:        head + `pp = 4, micro_batches = 64` + tail,
	}, {
		// 32 layers / pp 4 / 4 a virtual stage: 2 model chunks a rank
		name:        "pp 4, 4 layers a virtual stage: the interleaved schedule, 2 chunks a rank",
		file:        script,
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"pipeline-model-parallel-size=4", "num-layers-per-virtual-pipeline-stage=4"}},
		notModelled: llama3NotModelled,
		hand:        head + `pp = 4, schedule = "interleaved", virtual_stages = 2, micro_batches = 64` + tail,
	}, {
		name:        "pp 4, 2 virtual stages a rank",
		file:        script,
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"pipeline-model-parallel-size=4", "num-virtual-stages-per-pipeline-rank=2"}},
		notModelled: llama3NotModelled,
		hand:        head + `pp = 4, schedule = "interleaved", virtual_stages = 2, micro_batches = 64` + tail,
	}, {
		// 30 layers + the embedding + the loss = 32 over 4 stages: the first
		// and last build one layer fewer
		name: "30 layers with the embedding and the loss accounted in the split",
		file: script,
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"num-layers=30", "pipeline-model-parallel-size=4",
			"account-for-embedding-in-pipeline-split=true", "account-for-loss-in-pipeline-split=true"}},
		notModelled: llama3NotModelled,
		hand:        layers30 + `pp = 4, micro_batches = 64, stage_layers = [7, 8, 8, 7]` + tail,
	}, {
		// the same with 2 chunks a rank: chunk g on rank g mod 4, the
		// embedding's chunk 0 and the loss's chunk 7 one layer fewer
		name: "30 layers accounted, 2 virtual stages a rank",
		file: script,
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"num-layers=30", "pipeline-model-parallel-size=4", "num-virtual-stages-per-pipeline-rank=2",
			"account-for-embedding-in-pipeline-split=true", "account-for-loss-in-pipeline-split=true"}},
		notModelled: llama3NotModelled,
		hand:        layers30 + `pp = 4, schedule = "interleaved", virtual_stages = 2, micro_batches = 64, stage_layers = [3, 4, 4, 4, 4, 4, 4, 3]` + tail,
	}, {
		// (32 - 6 - 6) / 2 middle stages
		name:        "uneven first and last stages: 6 layers each, 10 in the middle ones",
		file:        script,
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"pipeline-model-parallel-size=4", "decoder-first-pipeline-num-layers=6", "decoder-last-pipeline-num-layers=6"}},
		notModelled: llama3NotModelled,
		hand:        head + `pp = 4, micro_batches = 64, stage_layers = [6, 10, 10, 6]` + tail,
	}, {
		// arguments.py at d98e8a6: Megatron-FSDP (with its sharding strategy),
		// TE's userbuffers, no gradient-accumulation fusion, recompute modules
		// beyond core_attn: each said, none replayed
		name: "the split flags at pp 1: understood, no effect; Megatron-FSDP, userbuffers and recompute modules said",
		file: script,
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"num-layers-per-virtual-pipeline-stage=4", "account-for-loss-in-pipeline-split=true",
			"use-megatron-fsdp=true", "data-parallel-sharding-strategy=optim_grads_params", "no-gradient-accumulation-fusion=true", "tp-comm-overlap=true", "recompute-activations=true", "recompute-modules=[core_attn, mlp]"}},
		notModelled: []string{
			"recompute-modules: mlp recomputed too (memsh's selective recompute is core_attn's)",
			"use-megatron-fsdp: Megatron-FSDP's sharded parameters, gradients and optimizer states (data-parallel-sharding-strategy)",
			"no-gradient-accumulation-fusion: each linear's weight gradient in a temporary before it is added to main_grad",
			"tp-comm-overlap: Transformer Engine's userbuffers overlapping the tensor-parallel collectives with the GEMMs",
			"empty-unused-memory-level: torch.cuda.empty_cache() between steps (memsh keeps the allocator's cache)",
		},
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", checkpoint = "selective", gpu = "H100-80GB",
             parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		// the run flags Megatron-LM's functional tests set (megatron_run_flags.go):
		// checkpointing and logging of no effect, deterministic kernels and the
		// logged norms said, the softmax flags of no effect under flash attention
		name: "the functional tests' run flags: understood; deterministic kernels and the logged norms said",
		file: script,
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"deterministic-mode=true", "log-params-norm=true", "log-num-zeros-in-grad=true",
			"async-save=true", "use-persistent-ckpt-worker=true", "dist-ckpt-strictness=log_all", "distributed-backend=nccl", "timing-log-level=0",
			"log-memory-to-tensorboard=true", "attention-softmax-in-fp32=true", "no-bias-gelu-fusion=true"}},
		notModelled: append([]string{
			"deterministic-mode: deterministic kernels (Transformer Engine's attention backward, a fixed NCCL algorithm): memsh prices the default ones",
			"log-params-norm: the parameters' norm each logged step, after the step (below the peak): not timed",
			"log-num-zeros-in-grad: a count of the zero gradients each step, after the backward (below the peak): not timed",
			"no-bias-gelu-fusion: the MLP's bias and GeLU as separate PyTorch ops (memsh replays the fused bias_gelu)",
		}, llama3NotModelled...),
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB",
             parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		// arguments.py at d98e8a6, line 3221: --cp-comm-type p2p by default
		// (TE's ring); a2a is Ulysses
		name:        "cp 2 with --cp-comm-type a2a: Ulysses",
		file:        script,
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"context-parallel-size=2", "cp-comm-type=a2a"}},
		notModelled: llama3NotModelled,
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 32, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB",
             parallel = parallel(dp = 4, cp = 2, loss_parallel = "megatron_fused", cp_mode = "ulysses", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		name: "cp 2 with --cp-comm-type allgather: said, the ring replayed",
		file: script,
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"context-parallel-size=2", "cp-comm-type=allgather"}},
		notModelled: []string{
			"empty-unused-memory-level: torch.cuda.empty_cache() between steps (memsh keeps the allocator's cache)",
			"cp-comm-type: allgather (Transformer Engine's all-gather attention; memsh replays the ring)",
		},
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 32, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, fp8_param_gather = True, optimizer = "adamw", gpu = "H100-80GB",
             parallel = parallel(dp = 4, cp = 2, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}})
}

func TestMegatronPipelineErrors(t *testing.T) {
	const launch = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000 --pipeline-model-parallel-size 4"
	runErrorCases(t, []errorCase{
		{name: "layers the stages do not divide", file: "run.sh", config: launch + " --account-for-loss-in-pipeline-split\n", opts: Options{GPUs: 8},
			want: "run.sh: key pipeline-model-parallel-size: 9 layers do not divide over 4 stages", wantHint: "must divide"},
		{name: "virtual stages that do not divide a stage's layers", file: "run.sh", config: launch + " --num-layers-per-virtual-pipeline-stage 3\n", opts: Options{GPUs: 8},
			want: "run.sh: key num-layers-per-virtual-pipeline-stage: 8 layers over pipeline-model-parallel-size 4 do not divide into chunks of 3", wantHint: "divide by it"},
		{name: "middle stages the layers left do not divide", file: "run.sh", config: launch + " --decoder-first-pipeline-num-layers 1\n", opts: Options{GPUs: 8},
			want: "run.sh: key decoder-first-pipeline-num-layers: 7 layers left over 3 middle stages", wantHint: "middle stages"},
		{name: "uneven stages with the embedding accounted", file: "run.sh", config: launch + " --decoder-last-pipeline-num-layers 2 --account-for-embedding-in-pipeline-split\n", opts: Options{GPUs: 8},
			want: "run.sh: key account-for-embedding-in-pipeline-split: a standalone embedding or loss stage with uneven stages", wantHint: "Megatron asserts the same"},
		// transformer_config.py at d98e8a6, lines 1919-1931
		{name: "full recompute without a layer count", file: "run.sh", config: launch + " --recompute-granularity full --recompute-method uniform\n", opts: Options{GPUs: 8},
			want: "run.sh: key recompute-num-layers: full recompute needs it", wantHint: "--recompute-num-layers 1"},
		{name: "selective recompute with a layer count", file: "run.sh", config: launch + " --recompute-activations --recompute-num-layers 1\n", opts: Options{GPUs: 8},
			want: "run.sh: key recompute-num-layers: selective recompute takes no layer count", wantHint: "drop it"},
		{name: "layers per virtual stage with uneven stages", file: "run.sh", config: launch + " --num-layers-per-virtual-pipeline-stage 1 --decoder-first-pipeline-num-layers 2\n", opts: Options{GPUs: 8},
			want: "run.sh: key num-layers-per-virtual-pipeline-stage: with --decoder-first-pipeline-num-layers", wantHint: "--num-virtual-stages-per-pipeline-rank"},
	})
}
