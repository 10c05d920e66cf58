package importers

import "testing"

// muonSplitQKV is what every Megatron Muon run lists: its split of the
// fused QKV, which memsh steps whole.
const muonSplitQKV = "Muon's split of the fused QKV into its Q, K and V blocks (--muon-split-qkv, the default): their fp32 copies at the step's peak where QKV is the largest matrix; memsh orthogonalizes it whole"

// TestMegatronMuon reads Megatron-LM's Muon flags (arguments.py at
// d98e8a64dd) on the Llama 3 8B script: --optimizer muon beside the
// script's --use-distributed-optimizer is the layer-wise optimizer
// (arguments.py l.1725-1736), muon() under the distributed optimizer;
// dist_muon sets it without the flag; --muon-momentum's default is 0.9
// and --muon-nesterov's off, so muon()'s torch defaults are overridden.
func TestMegatronMuon(t *testing.T) {
	const head = `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 16, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, `
	runImportCases(t, []importCase{{
		name:        "--optimizer muon with the script's --use-distributed-optimizer: the layer-wise optimizer",
		file:        "megatron/train_llama3_8b_h100_fp8.sh",
		step:        megatronStep(128, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"optimizer=muon"}},
		notModelled: append([]string{muonSplitQKV}, llama3NotModelled...),
		hand: llama3Model + head + `fp8_param_gather = True, optimizer = muon(momentum = 0.9, nesterov = False), gpu = "H100-80GB",
             parallel = parallel(dp = 8, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		name: "dist_muon at tp 2 with the Muon flags: the distributed optimizer it implies, Nesterov, 7 steps, blockwise",
		file: "megatron/train_llama3_8b_h100_fp8.sh",
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"optimizer=dist_muon", "use-distributed-optimizer=false", "fp8-param-gather=false",
			"tensor-model-parallel-size=2", "muon-nesterov=true", "muon-num-ns-steps=7", "muon-tp-mode=blockwise", "muon-momentum=0.95"}},
		notModelled: append([]string{muonSplitQKV}, llama3NotModelled...),
		hand: llama3Model + `plan = train(gpt, batch = 1, seq = 8192, grad_accum = 32, precision = precision("megatron", grads = "bf16"), dataloader_mask = False,
             float8 = "te-delayed", fp8_amax_history = 1024, optimizer = muon(momentum = 0.95, ns_steps = 7, tp_mode = "blockwise"), gpu = "H100-80GB",
             parallel = parallel(dp = 4, tp = 2, sequence_parallel = True, loss_parallel = "megatron_fused", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		name: "--optimizer muon without the distributed optimizer, no QKV split, the SYRK kernel listed",
		file: "megatron/train_llama3_8b_h100_fp8.sh",
		step: megatronStep(128, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"optimizer=muon", "use-distributed-optimizer=false", "fp8-param-gather=false",
			"muon-no-split-qkv=true", "muon-use-syrk=true", "muon-scale-mode=unit_rms_norm", "muon-extra-scale-factor=0.2"}},
		notModelled: append([]string{"--muon-use-syrk: the Gram products as emerging_optimizers' Triton SYRK kernel (half the FLOPs); priced as GEMMs"}, llama3NotModelled...),
		hand: llama3Model + head + `optimizer = muon(momentum = 0.9, nesterov = False), gpu = "H100-80GB",
             parallel = parallel(dp = 8, loss_parallel = "megatron_fused"), clip_grad_norm = 1.0)`,
	}})
}

// TestMegatronMuonErrors: the Muon flags memsh refuses, each with its
// reason and the value to use.
func TestMegatronMuonErrors(t *testing.T) {
	const launch = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000 --bf16"
	runErrorCases(t, []errorCase{
		{name: "the layer-wise optimizer's legacy path", file: "run.sh", config: launch + " --optimizer muon --use-distributed-optimizer --no-use-layer-wise-param-layout\n", opts: Options{GPUs: 8},
			want:     "run.sh: key no-use-layer-wise-param-layout: the layer-wise optimizer's legacy ping-pong path (every parameter, Adam's too, owned whole by a rank in order of size, the parameters all-gathered by flattening) is not modelled",
			wantHint: "drop it"},
		{name: "distributed Newton-Schulz", file: "run.sh", config: launch + " --optimizer muon --muon-tp-mode distributed\n", opts: Options{GPUs: 8},
			want: "run.sh: key muon-tp-mode: distributed (Newton-Schulz distributed over the TP ranks, a Gram all-reduce an iteration) is not modelled", wantHint: "blockwise"},
		{name: "an unknown TP mode", file: "run.sh", config: launch + " --optimizer muon --muon-tp-mode ring\n", opts: Options{GPUs: 8},
			want: "run.sh: key muon-tp-mode: unknown mode ring", wantHint: "duplicated"},
		{name: "Newton-Schulz in fp32", file: "run.sh", config: launch + " --optimizer muon --muon-fp32-matmul-prec high\n", opts: Options{GPUs: 8},
			want: "run.sh: key muon-fp32-matmul-prec: high is not modelled: Newton-Schulz runs in fp32 there, not bf16", wantHint: "medium"},
		{name: "the cubic coefficients", file: "run.sh", config: launch + " --optimizer muon --muon-coefficient-type cubic5\n", opts: Options{GPUs: 8},
			want: "run.sh: key muon-coefficient-type: cubic5 is not modelled: its iterations are not the three-product quintic ones", wantHint: "quintic"},
		{name: "Lion beside Muon", file: "run.sh", config: launch + " --optimizer muon --muon-scalar-optimizer lion\n", opts: Options{GPUs: 8},
			want: "run.sh: key muon-scalar-optimizer: lion for the parameters that are not Muon's is not modelled", wantHint: "adam"},
		{name: "a momentum out of range", file: "run.sh", config: launch + " --optimizer muon --muon-momentum 1.5\n", opts: Options{GPUs: 8},
			want: "run.sh: key muon-momentum: 1.5 is not in [0, 1)", wantHint: "0.9"},
		{name: "Muon in fp32", file: "run.sh", config: "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000 --optimizer muon\n", opts: Options{GPUs: 8},
			want: "run.sh: key optimizer: muon without --bf16 is not modelled (Megatron refuses it with --fp16)", wantHint: "--bf16"},
		{name: "another emerging optimizer", file: "run.sh", config: launch + " --optimizer soap\n", opts: Options{GPUs: 8},
			want: "run.sh: key optimizer: optimizer soap (NVIDIA's emerging_optimizers) is not modelled", wantHint: "dist_muon"},
		{name: "an unknown optimizer", file: "run.sh", config: launch + " --optimizer adagrad\n", opts: Options{GPUs: 8},
			want: "run.sh: key optimizer: unknown optimizer adagrad", wantHint: "muon"},
	})
}
