package importers

import (
	"slices"
	"strings"
	"testing"
)

// TestMegatronMoE imports a Megatron-LM MoE launch (testdata/megatron/
// train_moe_small.sh) and checks its plan against the one written by hand
// from Megatron's arguments: --moe-layer-freq's dense first layer, the
// MoE layer's grouped experts with the shared expert, the sigmoid router
// with its expert bias, ep 2 with whole experts, the router in fp32.
func TestMegatronMoE(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "a DeepSeek-style MoE on 8 GPUs: tp 2, ep 2, expert tp 1",
		file: "megatron/train_moe_small.sh",
		step: megatronStep(32, 4096),
		opts: Options{GPUs: 8},
		hand: `attn = attention(1024, 8, impl = "flash", rope = True, fused_qkv = True, name = "self_attention")
dense = sequential(
    residual(sequential(rmsnorm(1024, name = "input_layernorm"), attn)),
    residual(sequential(rmsnorm(1024, name = "pre_mlp_layernorm"), mlp(1024, 2816, act = "swiglu", name = "mlp"))),
)
sparse = sequential(
    residual(sequential(rmsnorm(1024, name = "input_layernorm"), attn)),
    residual(sequential(rmsnorm(1024, name = "pre_mlp_layernorm"),
                        moe(1024, 256, 8, 2, act = "swiglu", impl = "grouped", router = "sigmoid", score_bias = True,
                            shared_experts = 1, shared_hidden = 512, router_name = "router", name = "mlp"))),
)
gpt = model("gpt", embedding(32000, 1024, name = "embedding"), repeat([dense] + [sparse] * 3, name = "decoder.layers"),
            rmsnorm(1024, name = "final_layernorm"), vocab = 32000)
plan = train(gpt, batch = 1, seq = 4096, grad_accum = 8, precision = "megatron", optimizer = "adamw", gpu = "H100-80GB",
             parallel = parallel(dp = 4, tp = 2, sequence_parallel = True, ep = 2, expert_tp = 1, router_dtype = "fp32", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}, {
		// Megatron's defaults: SequentialMLP (replayed), the allgather
		// dispatcher (listed), softmax over the top-k logits
		name: "the same without --moe-grouped-gemm, on the allgather dispatcher, with softmax routing",
		file: "megatron/train_moe_small.sh",
		step: megatronStep(32, 4096),
		opts: Options{GPUs: 8, Overrides: []string{"moe-grouped-gemm=false", "moe-token-dispatcher-type=allgather", "moe-router-score-function=softmax",
			"moe-router-enable-expert-bias=false"}},
		notModelled: []string{"moe-token-dispatcher-type: allgather (Megatron's default): every tp x ep rank's tokens all-gathered into its global buffer and the outputs reduce-scattered; memsh replays the alltoall dispatcher"},
		hand: `attn = attention(1024, 8, impl = "flash", rope = True, fused_qkv = True, name = "self_attention")
dense = sequential(
    residual(sequential(rmsnorm(1024, name = "input_layernorm"), attn)),
    residual(sequential(rmsnorm(1024, name = "pre_mlp_layernorm"), mlp(1024, 2816, act = "swiglu", name = "mlp"))),
)
sparse = sequential(
    residual(sequential(rmsnorm(1024, name = "input_layernorm"), attn)),
    residual(sequential(rmsnorm(1024, name = "pre_mlp_layernorm"),
                        moe(1024, 256, 8, 2, act = "swiglu", impl = "sequential", router = "topk_softmax",
                            shared_experts = 1, shared_hidden = 512, router_name = "router", name = "mlp"))),
)
gpt = model("gpt", embedding(32000, 1024, name = "embedding"), repeat([dense] + [sparse] * 3, name = "decoder.layers"),
            rmsnorm(1024, name = "final_layernorm"), vocab = 32000)
plan = train(gpt, batch = 1, seq = 4096, grad_accum = 8, precision = "megatron", optimizer = "adamw", gpu = "H100-80GB",
             parallel = parallel(dp = 4, tp = 2, sequence_parallel = True, ep = 2, expert_tp = 1, router_dtype = "fp32", distributed_optimizer = True), clip_grad_norm = 1.0)`,
	}})
}

func TestMegatronMoEErrors(t *testing.T) {
	const launch = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000"
	const moe = launch + " --disable-bias-linear --num-experts 8"
	runErrorCases(t, []errorCase{
		{name: "experts with linear biases", file: "run.sh", config: launch + " --num-experts 8\n", opts: Options{GPUs: 8},
			want: "run.sh: key num-experts: MoE layers with linear biases are not modelled", wantHint: "--disable-bias-linear"},
		{name: "an MoE flag without experts", file: "run.sh", config: launch + " --moe-router-topk 2\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-router-topk: an MoE flag without --num-experts (Megatron builds no MoE layer)", wantHint: "--num-experts N"},
		{name: "experts that do not split over ep", file: "run.sh", config: launch + " --disable-bias-linear --num-experts 6 --expert-model-parallel-size 4\n", opts: Options{GPUs: 8},
			want: "run.sh: key expert-model-parallel-size: 6 experts do not split over 4 expert-parallel ranks", wantHint: "Megatron asserts"},
		{name: "a top-k over more experts than there are", file: "run.sh", config: moe + " --moe-router-topk 9\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-router-topk: 9 is out of range (want 1 to 8)"},
		{name: "a layer pattern of the wrong length", file: "run.sh", config: moe + " --moe-layer-freq '([0]*1+[1]*2)'\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-layer-freq: 3 layers in the pattern, 2 in the model", wantHint: "--num-layers"},
		{name: "a layer pattern that is Python code", file: "run.sh", config: moe + " --moe-layer-freq '__import__(\"os\")'\n", opts: Options{GPUs: 8},
			want: `run.sh: key moe-layer-freq: invalid pattern "__import__(\"os\")": Megatron allows only , digits [ ] ( ) + and * (got "_")`, wantHint: "0 (dense) and 1 (MoE)"},
		{name: "a layer pattern a billion long", file: "run.sh", config: moe + " --moe-layer-freq '[1]*1000000000'\n", opts: Options{GPUs: 8},
			want: `run.sh: key moe-layer-freq: invalid pattern "[1]*1000000000" at 14: a number too large`},
		{name: "a layer pattern longer than the model", file: "run.sh", config: moe + " --moe-layer-freq '([1]*500)*500'\n", opts: Options{GPUs: 8},
			want: `run.sh: key moe-layer-freq: invalid pattern "([1]*500)*500" at 13: longer than 65536 layers`},
		{name: "a layer pattern of twos", file: "run.sh", config: moe + " --moe-layer-freq '[1,2]'\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-layer-freq: Megatron raises Invalid layer pattern: 2"},
		{name: "a layer pattern without an MoE layer", file: "run.sh", config: moe + " --moe-layer-freq '[0]*2'\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-layer-freq: the pattern has no MoE layer"},
		{name: "a frequency of zero", file: "run.sh", config: moe + " --moe-layer-freq 0\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-layer-freq: 0 is not a frequency"},
		{name: "the flex dispatcher", file: "run.sh", config: moe + " --moe-token-dispatcher-type flex\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-token-dispatcher-type: the flex dispatcher (DeepEP, HybridEP) is not modelled", wantHint: "alltoall"},
		{name: "expert tp between 1 and tp", file: "run.sh", config: moe + " --tensor-model-parallel-size 4 --sequence-parallel --expert-tensor-parallel-size 2\n", opts: Options{GPUs: 8},
			want: "run.sh: key expert-tensor-parallel-size: expert tensor parallelism of 2 under tp 4 is not modelled", wantHint: "1 (whole experts)"},
		{name: "an unknown score function", file: "run.sh", config: moe + " --moe-router-score-function relu\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-router-score-function: unknown score function relu", wantHint: "softmax, sigmoid"},
		{name: "a router in bf16 by name", file: "run.sh", config: moe + " --moe-router-dtype bf16\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-router-dtype: unknown dtype bf16", wantHint: "fp32 or fp64"},
		{name: "group top-k without groups", file: "run.sh", config: moe + " --moe-router-group-topk 2\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-router-group-topk: group-limited routing needs the groups", wantHint: "--moe-router-num-groups"},
		{name: "padding to a capacity never given", file: "run.sh", config: moe + " --moe-pad-expert-input-to-capacity\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-pad-expert-input-to-capacity: Megatron asserts: it needs a capacity factor", wantHint: "--moe-expert-capacity-factor"},
		{name: "an unknown load balancing", file: "run.sh", config: moe + " --moe-router-load-balancing-type aux_loss magic\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-router-load-balancing-type: unknown type magic"},
		{name: "expert ranks folded over tensor-parallel ranks", file: "run.sh", config: moe + " --tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1 --expert-model-parallel-size 8\n", opts: Options{GPUs: 8},
			want:     "run.sh: key expert-model-parallel-size: 8 expert ranks over tp 2 x cp 1 x dp 4 (Megatron's MoE parallel folding) are not modelled: memsh takes them from the data-parallel group",
			wantHint: "divides the 4 data-parallel ranks"},
		{name: "upcycling", file: "run.sh", config: moe + " --moe-use-upcycling\n", opts: Options{GPUs: 8},
			want: "run.sh: key moe-use-upcycling: upcycling converts a dense checkpoint and trains no step"},
	})
}

// TestMegatronMoEPattern evaluates --moe-layer-freq's patterns as
// Python's eval does over Megatron's allowed characters.
func TestMegatronMoEPattern(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int64
		err  string
	}{
		{in: "([0]*1+[1]*15)", want: append([]int64{0}, slices.Repeat([]int64{1}, 15)...)},
		{in: "([1]*3+[0]*1)*3", want: []int64{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}},
		{in: "[1,0,1,]", want: []int64{1, 0, 1}},
		{in: "2*[0,1]", want: []int64{0, 1, 0, 1}},
		{in: "[1]*(2+1)", want: []int64{1, 1, 1}},
		{in: "[]", want: []int64{}},
		{in: "[1", err: "want , or ]"},
		{in: "[[1]]", err: "a list inside a list"},
		{in: "[1]*[1]", err: "* repeats a list by a number"},
		{in: "[1]+2", err: "+ joins two lists or two small numbers"},
		{in: "3", err: "a number, not a list"},
		{in: "[1] *2", err: "Megatron allows only"},
		{in: "[1]*2 ", err: "Megatron allows only"},
		{in: strings.Repeat("(", 100) + "[1]" + strings.Repeat(")", 100), err: "nested too deeply"},
		{in: "[1]*99999999999999999999", err: "a number too large"},
	} {
		got, err := evalLayerPattern(c.in, 16)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: got %v, %v; want an error with %q", c.in, got, err, c.err)
		case c.err == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
