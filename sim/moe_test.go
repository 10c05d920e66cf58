package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// moeBlockPlan trains one MoE block on batch 1 x seq tokens.
func moeBlockPlan(t *testing.T, m *nn.MoE, seq int64, prec string) *core.Plan {
	t.Helper()
	return layerPlan(t, m, m.Dim, seq, prec)
}

// layerPlan trains layer l of input width dim on batch 1 x seq tokens.
func layerPlan(t *testing.T, l core.Layer, dim, seq int64, prec string) *core.Plan {
	t.Helper()
	p, err := core.LookupPrecision(prec)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cuda")
	model := &core.Model{Name: l.Kind(), Layers: []core.Layer{l}, Loss: "none", InputDim: dim, InputGrad: true}
	return &core.Plan{Model: model, Batch: 1, Seq: seq, GradAccum: 1, Members: 1, Precision: p,
		Optimizer: core.Optimizer{Kind: core.SGD}, Runtime: rt, Device: hw.Device{Name: "test", Memory: 1 << 40}}
}

// The per-expert loop saves what transformers' MixtralSparseMoeBlock
// saves, measured with saved_tensors_hooks on the CPU
// (tools/oracle/moe_loop.py; transformers 4.48.1, torch 2.15.0): 8
// tokens, dim 64, 4 experts of 128, top-2, fp32. Every expert's storages
// are linear in its token count, so the total does not depend on how
// the oracle's router spread the 16 copies. Trainable: 47,776 bytes
// (the input, softmax output, indices, the renormalisation's clone and
// sum; per expert the where() indices, the selected rows, both
// projections' outputs, the silu output, the product, the routing
// weights, the expert output and the weighted output that index_add_
// keeps). Frozen weights, input requiring grad: 33,440 bytes (no linear
// keeps its input).
func TestMoELoopSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		freeze []string
		want   int64
	}{{nil, 47_776}, {[]string{"all"}, 33_440}} {
		p := moeBlockPlan(t, &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", NormTopK: true}, 8, "fp32")
		p.Freeze = tc.freeze
		if got := evalPlan(t, p).SavedActivations; got != tc.want {
			t.Errorf("freeze=%v: saved %d bytes, transformers saves %d", tc.freeze, got, tc.want)
		}
	}
}

// quant= reaches what bitsandbytes reaches: with nn.Linear experts (impl
// "loop", transformers 4.x) every expert projection and the router (an
// nn.Linear named gate: replace_with_bnb_linear converts all but
// lm_head); fused 3-D experts and parameter routers stay in the params
// dtype (bitsandbytes issue #1849).
func TestMoEQuantReachesLinearExperts(t *testing.T) {
	expert, router := []int64{128, 64}, []int64{4, 64}
	for _, tc := range []struct {
		impl string
		want int64
	}{
		// router + 4 experts x (gate, up [128, 64], down [64, 128]), nf4 each
		{"loop", core.QuantBytes("nf4", router) + 12*core.QuantBytes("nf4", expert)},
		// gate_up [4, 256, 64] + down [4, 64, 128] and the router [4, 64], bf16
		{"fused_loop", 2 * (4*256*64 + 4*64*128 + 4*64)},
		{"grouped", 2 * (4*256*64 + 4*64*128 + 4*64)},
	} {
		p := moeBlockPlan(t, &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: tc.impl}, 8, "bf16")
		p.Quant, p.Freeze = "nf4", []string{"all"}
		if got := evalPlan(t, p).States.Params; got != tc.want {
			t.Errorf("impl %s: params %d bytes, want %d", tc.impl, got, tc.want)
		}
	}
}

// LoRA targets reach experts as PEFT's target_modules do: by name, the
// nn.Linear experts only. Rank 2: an adapter on a 64 -> 128 projection has
// 2*64 + 128*2 = 384 weights, on the router (64 -> 4) 2*64 + 4*2 = 136.
// Freezing by role reaches the experts' weights in either storage.
func TestMoEAdaptersAndFreezing(t *testing.T) {
	for _, tc := range []struct {
		impl    string
		targets []string
		freeze  []string
		want    int64 // trainable parameters
	}{
		{"loop", []string{"gate"}, nil, 4 * 384},
		{"loop", []string{"expert_down"}, nil, 4 * 384},
		{"loop", []string{"router"}, nil, 136},
		{"loop", []string{"all-linear"}, nil, 136 + 12*384},
		{"fused_loop", []string{"all-linear"}, nil, 0},      // no nn.Linear to adapt: refused
		{"grouped", []string{"gate", "up", "down"}, nil, 0}, // refused
		// router 256 + 12 expert matrices of 8,192; up frozen
		{"loop", nil, []string{"expert_up"}, 256 + 8*8192},
		// the fused gate_up [4, 256, 64] carries the up role
		{"grouped", nil, []string{"expert_up"}, 256 + 4*8192},
	} {
		p := moeBlockPlan(t, &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: tc.impl}, 8, "bf16")
		if tc.targets != nil {
			p.LoRA = &core.LoRA{Rank: 2, Alpha: 4, Targets: tc.targets}
		}
		p.Freeze = tc.freeze
		if tc.want == 0 { // no linear has those roles: PEFT finds no target module, memsh refuses it too
			if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "reach no linear module") {
				t.Errorf("impl %s, targets %v: %v, want the error that they reach no linear module", tc.impl, tc.targets, err)
			}
			continue
		}
		if got := evalPlan(t, p).TrainableParams; got != tc.want {
			t.Errorf("impl %s, targets %v, freeze %v: %d trainable, want %d", tc.impl, tc.targets, tc.freeze, got, tc.want)
		}
	}
}

// Experts no token reaches still hold their weights (and adapters), and
// their optimizer state: one token, top-1 of 4 experts leaves three idle.
func TestMoEIdleExpertsHoldWeights(t *testing.T) {
	for _, impl := range []string{"loop", "fused_loop", "grouped"} {
		m := &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 1, Act: "swiglu", Impl: impl}
		p := moeBlockPlan(t, m, 1, "bf16")
		p.Freeze = []string{"all"}
		r := evalPlan(t, p)
		if r.Params != m.Params() || r.States.Params != 2*m.Params() {
			t.Errorf("impl %s: %d parameters in %d bytes, want %d in %d", impl, r.Params, r.States.Params, m.Params(), 2*m.Params())
		}
		// Trained in full, the idle experts keep their AdamW state: other
		// steps' tokens reached them, and torch.optim keeps a state once
		// made (core.ParamInfo.Unrouted; bf16 moments, 4 bytes a weight).
		p.Freeze, p.Optimizer = nil, core.Optimizer{Kind: core.AdamW}
		if got := evalPlan(t, p).States.Optimizer; got != 4*m.Params() {
			t.Errorf("impl %s: optimizer state %d bytes, want %d", impl, got, 4*m.Params())
		}
	}
}

// Multi-head latent attention saves, in bf16 under flash (b=1, s=8, dim
// 64, 4 heads, q latent 32, kv latent 16, qk 8+4, v 8):
//
//	q_a_proj and kv_a_proj_with_mqa: the input, once      1,024
//	q_a_layernorm: fp32 input 1,024, rsqrt 32, normalized 512   1,568
//	q_b_proj: its input                                     512
//	kv_a_layernorm: the fp32 copy of the latent slice 512, rsqrt 32,
//	  normalized 256                                        800
//	kv_b_proj: its input                                    256
//	flash: q, k, v (padded to 12 per head), out: 4 x 768; lse 128   3,200
//	o_proj: the merged heads (8 per head)                   512
//
// 7,872 bytes: the per-head keys and values dominate, unlike the latent
// an inference cache keeps.
func TestMLASaves(t *testing.T) {
	a := &nn.MLA{Dim: 64, Heads: 4, QLoraRank: 32, KVLora: 16, Nope: 8, RopeDim: 4, VDim: 8, Impl: "flash", Causal: true}
	r := evalPlan(t, layerPlan(t, a, 64, 8, "bf16"))
	if r.SavedActivations != 7872 {
		t.Errorf("saved %d bytes, want 7,872", r.SavedActivations)
	}
	if r.Params != a.Params() || a.Params() != 64*32+32+32*48+64*20+16+16*64+32*64 {
		t.Errorf("params %d (layer says %d)", r.Params, a.Params())
	}
}

// MLA under context parallelism, cp=2 over the 8 tokens of TestMLASaves
// (4 a rank), counted by hand: outside the kernel every saved tensor is a
// rank's 4 tokens, half of 4,672 bytes: 2,336. The kernel saves, under the
// ring, the local q, k and v (4 tokens x 4 heads x 12 x 2 bytes = 384
// each), its output (384) and lse (4 x 4 x 4 = 64); under Ulysses the
// exchanged q, k and v and its output for all 8 tokens and 2 heads (the
// same 384 each) and lse (8 x 2 x 4 = 64): 1,600 either way, 3,936 in all.
// Ulysses exchanges q, k, v (384 bytes each) and the output (384) by
// all-to-all, forward and backward: 3,072 bytes. Both kernels see every
// key: the same FLOPs, twice those of a rank attending to its own tokens
// (Ulysses' MLA once skipped the exchange, searching DeepSeek-V3 with
// half the attention FLOPs; DeepSpeed's DistributedAttention, arXiv:2309.14509).
func TestMLAContextParallel(t *testing.T) {
	a := &nn.MLA{Dim: 64, Heads: 4, QLoraRank: 32, KVLora: 16, Nope: 8, RopeDim: 4, VDim: 8, Impl: "flash", Causal: true}
	flops := map[string]float64{}
	for _, mode := range []string{"ring", "ulysses"} {
		p := layerPlan(t, a, 64, 8, "bf16")
		p.Parallel = core.Parallelism{CP: 2, CPMode: mode}
		r := evalPlan(t, p)
		if r.SavedActivations != 3936 {
			t.Errorf("%s: saved %d bytes, want 3,936", mode, r.SavedActivations)
		}
		var a2a int64
		for _, c := range r.CommBytes {
			if c.Name == "all_to_all" {
				a2a += c.Bytes
			}
		}
		if want := map[string]int64{"ring": 0, "ulysses": 3072}[mode]; a2a != want {
			t.Errorf("%s: all-to-all %d bytes, want %d (%v)", mode, a2a, want, r.CommBytes)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range prog.Ops {
			if op.Kind == "attention" {
				flops[mode] += op.Flops
			}
		}
	}
	// Ulysses: 2 x 8 queries x 4 keys (causal: half of 8) x 2 heads x
	// (12 + 12) = 3,072 a rank; the ring: 4 queries of all 4 heads over
	// the same keys, as many.
	if want := 2.0 * 4 * 4 * 4 * 24; flops["ring"] != want || flops["ulysses"] != want {
		t.Errorf("attention FLOPs a rank: ring %v, Ulysses %v; want %v each", flops["ring"], flops["ulysses"], want)
	}
	p := layerPlan(t, a, 64, 8, "bf16")
	p.Parallel = core.Parallelism{CP: 8, CPMode: "ulysses"}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "cp=8 does not divide the 4 attention heads") {
		t.Errorf("cp=8 over 4 heads: %v", err)
	}
}

// A Mamba-2 mixer saves, with the mamba_ssm combined kernel, the input of
// in_proj, its output zxbcdt, the scan output before the gated norm and
// the norm's rstd: per token, in bf16 (dim 64, 8 heads of 16, 2 groups,
// state 8): 2*64 + 2*(2*128 + 2*2*8 + 8) + 2*128 + 4*2 = 984 bytes, for
// any sequence length (nothing per chunk or per key); once, A =
// -exp(A_log.float()) and exp's result, 2*8*4 = 64 bytes.
func TestMamba2Saves(t *testing.T) {
	m := &nn.Mamba2{Dim: 64, Inner: 128, Heads: 8, HeadDim: 16, Groups: 2, State: 8, ConvK: 4, Chunk: 16, ConvBias: true, GatedNorm: true}
	for _, seq := range []int64{64, 256} {
		r := evalPlan(t, layerPlan(t, m, 64, seq, "bf16"))
		if want := seq*984 + 64; r.SavedActivations != want {
			t.Errorf("seq %d: saved %d bytes, want %d", seq, r.SavedActivations, want)
		}
	}
	// in_proj 64*296, conv1d 160*4 + 160, dt_bias, A_log, D 3*8, norm 128, out_proj 128*64
	if want := int64(64*296 + 160*4 + 160 + 3*8 + 128 + 128*64); m.Params() != want {
		t.Errorf("params %d, want %d", m.Params(), want)
	}
}

// Megatron's grouped experts (precision "megatron", impl "grouped")
// save what Megatron-Core 0.13's TEGroupedMLP and alltoall dispatcher
// save (nn/moe_megatron.go), against the eager grouped lowering: 8
// tokens, dim 64, 4 experts of 128, top-2 (16 routed rows), bf16.
// Megatron: the input the router's linear keeps (8 x 64 x 2 = 1,024),
// the softmax's fp32 probabilities (8 x 4 x 4 = 128), the top-k indices
// (8 x 2 x 8 = 128), the rows fc1 keeps (16 x 64 x 2 = 2,048), the fused
// weighted SwiGLU's gate, up and routing weights (2 x 16 x 128 x 2 +
// 16 x 2 = 8,224), fc2's input (16 x 128 x 2 = 4,096) and loss_func's
// loss_mask (8 x 4 = 32; megatron_batch.go): 15,680 bytes.
// Eager: silu(gate) too (4,096), and the unpermute weights the experts'
// outputs, keeping them (16 x 64 x 2 = 2,048) and the weights (8 x 2 x 2
// = 32) instead of the permuted ones: 21,792. Megatron-Core 0.12
// (parallel(unpermute_probs=True), on 2 data-parallel GPUs: the
// activations are one GPU's): the SwiGLU keeps gate and up alone (8,192)
// and the unpermute weights the outputs, keeping them and the weights
// (2,048 + 32): 17,728.
func TestMegatronGroupedExpertsSave(t *testing.T) {
	for _, tc := range []struct {
		prec      string
		unpermute bool
		want      int64
	}{{"megatron", false, 15_680}, {"bf16", false, 21_792}, {"megatron", true, 17_728}} {
		p := moeBlockPlan(t, &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped}, 8, tc.prec)
		if tc.unpermute {
			p.Parallel = core.Parallelism{DP: 2, UnpermuteProbs: true}
		}
		if got := evalPlan(t, p).SavedActivations; got != tc.want {
			t.Errorf("%s, unpermute_probs %v: saved %d bytes, want %d", tc.prec, tc.unpermute, got, tc.want)
		}
	}
}

// Megatron's alltoall dispatcher under expert tensor parallelism
// (nn/moe_megatron.go, token_dispatcher.py at core_v0.13.0): 8 tokens,
// dim 64, 4 experts of 128, top-2, bf16, tp 2 with sequence parallelism,
// ep 2, expert tp 2 (dp 2: 4 GPUs). Each rank routes its own 8 / 2 = 4
// tokens: 4 x 2 = 8 routed rows (8 x 64 x 2 = 1,024 bytes) go through the
// ep all-to-all, and only then are they all-gathered over the expert tp
// pair: 16 rows, 2,048 bytes; the experts' partial outputs (16 x 64 x 2)
// are reduce-scattered back before the combine all-to-all (1,024). With
// 4 / 2 = 2 local experts the rows are sorted by local expert after the
// gather and back before the reduce-scatter: two 16 x 64 chunk copies
// (sort_chunks, unsort_chunks), each reading and writing 2,048 bytes.
func TestMegatronDispatcherUnderExpertTP(t *testing.T) {
	p := moeBlockPlan(t, &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped}, 8, "megatron")
	p.Parallel = core.Parallelism{DP: 2, TP: 2, SequenceParallel: true, EP: 2, ETP: 2}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	copies := map[string]*core.OpInfo{}
	for i := range prog.Ops {
		if op := &prog.Ops[i]; op.Kind == "chunk_copy" {
			copies[op.Name] = op
		}
	}
	for _, name := range []string{"moe.sort_chunks", "moe.unsort_chunks"} {
		op := copies[name]
		if op == nil {
			t.Errorf("no %s among the chunk copies %v", name, copies)
			continue
		}
		if s := prog.Values[op.Out[0]].Shape; len(s) != 2 || s[0] != 16 || s[1] != 64 || op.Bytes != 2*2048 {
			t.Errorf("%s: shape %v, %g bytes moved; want [16 64], 4096", name, s, op.Bytes)
		}
	}
	type rec struct {
		kind, group string
		bytes       int64
	}
	fwd := map[rec]int{}
	for _, c := range prog.Comm {
		if !c.Backward {
			fwd[rec{c.Kind, c.Group, c.Bytes}]++
		}
	}
	for _, want := range []rec{
		{"all_to_all", "ep", 1024},     // dispatch and combine of the rank's 8 rows
		{"all_gather", "tp", 2048},     // the received rows over the expert tp pair
		{"reduce_scatter", "tp", 2048}, // the experts' partial outputs
	} {
		if fwd[want] == 0 {
			t.Errorf("no forward %v among %v", want, fwd)
		}
	}
	if fwd[rec{"all_to_all", "ep", 2048}] != 0 {
		t.Errorf("an all-to-all of 16 rows: the layer input was gathered before routing (%v)", fwd)
	}
}

// Qwen2-MoE's shared-expert gate under Megatron (nn/moe.go lowerShared,
// shared_experts.py at core_v0.12.0: F.linear(hidden_states,
// self.gate_weight) on the layer input as the block holds it): 8 tokens,
// dim 64, tp 2 with sequence parallelism, bf16. The gate reads this rank's
// 8 / 2 = 4 tokens, the input the router reads too, and gives 4 x 1
// scores; no all-gather of the input is made for it. Elsewhere (bf16,
// transformers' layer) it reads the gathered 8 x 64 input.
func TestMegatronSharedGateReadsShard(t *testing.T) {
	for _, tc := range []struct {
		prec       string
		rows       int64 // the gate's input and output rows
		gatherRows int64 // rows of the input the gate reads, 0: the layer input itself
	}{{"megatron", 4, 0}, {"bf16", 8, 8}} {
		m := &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped,
			SharedExperts: 1, SharedHidden: 256, SharedGate: true}
		p := moeBlockPlan(t, m, 8, tc.prec)
		p.Parallel = core.Parallelism{DP: 2, TP: 2, SequenceParallel: true, EP: 2, ETP: 2}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var gate *core.OpInfo
		for i := range prog.Ops {
			if op := &prog.Ops[i]; op.Kind == "matmul" && op.Module == "moe.shared_expert_gate" {
				gate = op
			}
		}
		if gate == nil {
			t.Fatalf("%s: no shared_expert_gate matmul", tc.prec)
		}
		in, out := prog.Values[gate.In[0]].Shape, prog.Values[gate.Out[0]].Shape
		if in[len(in)-2] != tc.rows || out[len(out)-2] != tc.rows || out[len(out)-1] != 1 {
			t.Errorf("%s: the gate reads %v and gives %v, want %d rows", tc.prec, in, out, tc.rows)
		}
		gathered := int64(0)
		for _, op := range prog.Ops {
			if op.Kind == "all_gather" && op.Out[0] == gate.In[0] {
				gathered = prog.Values[op.Out[0]].Shape[len(in)-2]
			}
		}
		if gathered != tc.gatherRows {
			t.Errorf("%s: the gate's input is an all-gather of %d rows, want %d", tc.prec, gathered, tc.gatherRows)
		}
	}
}

// parallel(shared_expert_overlap=True), Megatron's
// --moe-shared-expert-overlap (nn/moe.go lowerShared, shared_experts.py at
// core_v0.12.0): the shared expert's linears run with parallel_mode None
// over an all-gather made before them, so its up projection keeps the
// gathered input for the weight gradient. 8 tokens, dim 64, bf16, tp 2
// with sequence parallelism: the 8 x 64 x 2 = 1,024 bytes of the gathered
// input are kept beside the 4-token shard the router keeps anyway.
func TestMegatronSharedExpertOverlapKeepsGathered(t *testing.T) {
	saved := map[bool]int64{}
	for _, overlap := range []bool{false, true} {
		m := &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped,
			SharedExperts: 1, SharedHidden: 256, SharedGate: true}
		p := moeBlockPlan(t, m, 8, "megatron")
		p.Parallel = core.Parallelism{DP: 2, TP: 2, SequenceParallel: true, EP: 2, ETP: 2, SharedExpertOverlap: overlap}
		saved[overlap] = evalPlan(t, p).SavedActivations
	}
	if d := saved[true] - saved[false]; d != 8*64*2 {
		t.Errorf("the overlapped shared expert keeps %d bytes more (%d against %d), want 1,024", d, saved[true], saved[false])
	}
}

// The overlapped shared expert runs on SharedExpertMLP.stream (replay/
// streams.go, shared_experts.py at core_v0.12.0: every step under
// torch.cuda.stream(self.stream)), and autograd runs its backward there
// too: its tensors come from that stream's pools, and its matmuls make
// the forward's and the backward thread's cuBLAS workspaces for that
// stream (PyTorch keys them by handle and stream, replay/cublas.go).
// 8 tokens, dim 64, a shared expert of 256, bf16, tp 2: the tensors are
// all under 1 MiB, one small-pool segment of 2 MiB (kSmallBuffer in
// c10/cuda/CUDACachingAllocator.cpp); the two workspaces of 2 x 4 MiB +
// 8 x 16 KiB = 8,519,680 bytes each (the default :4096:2:16:8) go into
// one 20 MiB large-pool segment (kLargeBuffer, for requests under
// 10 MiB): 22 MiB. Without the overlap there is no such stream.
func TestMegatronSharedExpertStream(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		m := &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped,
			SharedExperts: 1, SharedHidden: 256, SharedGate: true}
		p := moeBlockPlan(t, m, 8, "megatron")
		p.Parallel = core.Parallelism{DP: 2, TP: 2, SequenceParallel: true, EP: 2, ETP: 2, SharedExpertOverlap: overlap}
		got := int64(-1)
		for _, s := range evalPlan(t, p).Streams {
			if s.Name == "shared_expert" {
				got = s.Bytes
			}
		}
		want := int64(-1) // no such stream
		if overlap {
			want = 22 << 20
		}
		if got != want {
			t.Errorf("overlap %v: the shared expert's stream reserves %d bytes, want %d (-1: none)", overlap, got, want)
		}
	}
}

// parallel(router_dtype="fp32"), Megatron's --moe-router-dtype
// (nn/moe_route.go routerDType, nn/moe_megatron.go
// reduceScatterInRouterDType; router.py l.66-71 and token_dispatcher.py
// l.624-629 at core_v0.12.0): 8 tokens, dim 64, 4 experts of 128, top-2,
// bf16 compute, tp 2 with sequence parallelism, ep 2, expert tp 2 (dp 2).
// The router reads this rank's 8 / 2 = 4 tokens: with fp32 its GEMM reads
// an fp32 copy of them, 4 x 64 x 4 = 1,024 bytes, and keeps it for the
// weight gradient; without, the bf16 input itself (512). The routing
// weights come out fp32 ([4, 2]). The experts' partial outputs, 16 rows
// of 64, are reduce-scattered in fp32 (16 x 64 x 4 = 4,096 bytes; bf16
// 2,048) and their gradient all-gathered in fp32 in the backward; the
// combine all-to-all carries the rank's 8 rows in bf16 either way (1,024).
// Both releases' paths (unpermute_probs) do the same.
func TestMegatronRouterDType(t *testing.T) {
	for _, tc := range []struct {
		dt         units.DType
		unpermute  bool
		routerIn   units.DType // the dtype of the input the router GEMM keeps
		weights    units.DType // the top-k routing weights
		reduceComm int64       // bytes of the experts' reduce-scatter (and its backward all-gather)
	}{
		{units.InvalidDType, false, units.BF16, units.BF16, 2048},
		{units.FP32, false, units.FP32, units.FP32, 4096},
		{units.FP32, true, units.FP32, units.FP32, 4096},
		{units.FP64, false, units.FP64, units.FP64, 8192},
	} {
		name := fmt.Sprintf("router_dtype %s, unpermute_probs %v", tc.dt.Name(), tc.unpermute)
		p := moeBlockPlan(t, &nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped}, 8, "megatron")
		p.Parallel = core.Parallelism{DP: 2, TP: 2, SequenceParallel: true, EP: 2, ETP: 2, RouterDType: tc.dt, UnpermuteProbs: tc.unpermute}
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var router *core.OpInfo
		var weights units.DType
		for i := range prog.Ops {
			op := &prog.Ops[i]
			if op.Kind == "matmul" && op.Module == "moe.router" {
				router = op
			}
			for _, v := range op.Out {
				if prog.Values[v].Name == "moe.routing_weights" || strings.HasPrefix(prog.Values[v].Name, "moe.routing_weights.") {
					weights = prog.Values[v].Dtype
				}
			}
		}
		if router == nil || len(router.Saved) == 0 {
			t.Fatalf("%s: no router matmul keeping its input", name)
		}
		in := prog.Values[router.Saved[0]]
		if in.Dtype != tc.routerIn || in.Bytes != int64(4*64*tc.routerIn.Bits()/8) {
			t.Errorf("%s: the router keeps %s %v (%d bytes), want %s [4 64]", name, in.Dtype.Name(), in.Shape, in.Bytes, tc.routerIn.Name())
		}
		if weights != tc.weights {
			t.Errorf("%s: routing weights in %s, want %s", name, weights.Name(), tc.weights.Name())
		}
		type rec struct {
			kind, group string
			bytes       int64
			backward    bool
		}
		comm := map[rec]int{}
		for _, c := range prog.Comm {
			comm[rec{c.Kind, c.Group, c.Bytes, c.Backward}]++
		}
		for _, want := range []rec{
			{"reduce_scatter", "tp", tc.reduceComm, false},
			{"all_gather", "tp", tc.reduceComm, true},
			{"all_to_all", "ep", 1024, false},
		} {
			if comm[want] == 0 {
				t.Errorf("%s: no %v among %v", name, want, comm)
			}
		}
	}
}

// MLA's attention FLOPs count the width each product reads: q x k over
// the qk head dim (nope + rope, 12 here) and p x v over v's: SDPA reads
// the v_head_dim view of kv_b_proj's output (8), flash-attn the copy
// padded to 12 (transformers' DeepseekV3Attention). 8 tokens, causal (4
// keys on average), 4 heads: 2 x 8 x 4 x 4 x (12 + 8) = 5,120 with SDPA
// (was counted with nope + v = 16 wide, 7,168), 6,144 with flash.
func TestMLAFlops(t *testing.T) {
	for impl, want := range map[string]float64{"sdpa": 5120, "flash": 6144} {
		a := &nn.MLA{Dim: 64, Heads: 4, QLoraRank: 32, KVLora: 16, Nope: 8, RopeDim: 4, VDim: 8, Impl: impl, Causal: true}
		prog, err := layerPlan(t, a, 64, 8, "bf16").LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		got := 0.0
		for _, op := range prog.Ops {
			if op.Kind == "attention" {
				got += op.Flops
			}
		}
		if got != want {
			t.Errorf("%s: attention FLOPs %v, want %v", impl, got, want)
		}
	}
}

// Mamba and Mamba-2 mixers refuse the layouts whose exchanges memsh does
// not model, tensor and context parallelism, rather than replay each
// rank's tokens scanned alone (no state passing, no all-to-all: Megatron's
// MambaContextParallel exchanges the heads), and keep data parallelism.
func TestMambaLayouts(t *testing.T) {
	mixers := []core.Layer{
		&nn.Mamba{Dim: 64, Inner: 128, State: 8, DTRank: 16, ConvK: 4, ConvBias: true},
		&nn.Mamba2{Dim: 64, Inner: 128, Heads: 8, HeadDim: 16, Groups: 2, State: 8, ConvK: 4, Chunk: 16, ConvBias: true, GatedNorm: true},
	}
	for _, mixer := range mixers {
		for _, tc := range []struct {
			par  core.Parallelism
			want string
		}{
			{core.Parallelism{CP: 2}, "cp=2: context parallelism of Mamba"},
			{core.Parallelism{TP: 2}, "tp=2: tensor parallelism of Mamba"},
			{core.Parallelism{DP: 2}, ""},
		} {
			p := layerPlan(t, mixer, 64, 64, "bf16")
			p.Parallel = tc.par
			_, err := Evaluate(p, core.Options{})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("%s %s: %v, want %q", mixer.Kind(), tc.par, err, tc.want)
			}
		}
	}
}
