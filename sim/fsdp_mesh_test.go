package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// TestShardOverDataAndContext: every sharding mode splits the states over
// the data-parallel and context-parallel ranks together (torchtitan's
// dp_shard_cp mesh, Megatron's data_parallel_group_with_context_parallel),
// less HSDP's replicas. linearStack's states, hand-counted: FSDP with
// bf16-mixed keeps fp32 parameters, gradients and Adam moments, 16Ψ over
// the shard group; Megatron's distributed optimizer bf16 parameters and
// fp32 main gradients whole and 12Ψ of master weights and moments sharded.
func TestShardOverDataAndContext(t *testing.T) {
	m := linearStack(8, 1024, 4096)
	psi := m.Params()
	for _, tc := range []struct {
		name string
		prec string
		par  core.Parallelism
		want replay.States
	}{
		{"fsdp dp=2 cp=4", "bf16-mixed", core.Parallelism{DP: 2, CP: 4, FSDP: true}, replay.States{Params: 4 * psi / 8, Grads: 4 * psi / 8, Optimizer: 8 * psi / 8}},
		{"fsdp dp=1 cp=8", "bf16-mixed", core.Parallelism{CP: 8, FSDP: true}, replay.States{Params: 4 * psi / 8, Grads: 4 * psi / 8, Optimizer: 8 * psi / 8}},
		{"hsdp 2x4", "bf16-mixed", core.Parallelism{DP: 8, DPReplicate: 2, FSDP: true}, replay.States{Params: 4 * psi / 4, Grads: 4 * psi / 4, Optimizer: 8 * psi / 4}},
		{"hsdp 2x2 cp=2", "bf16-mixed", core.Parallelism{DP: 4, DPReplicate: 2, CP: 2, FSDP: true}, replay.States{Params: 4 * psi / 4, Grads: 4 * psi / 4, Optimizer: 8 * psi / 4}},
		{"megatron dp=2 cp=4", "megatron", core.Parallelism{DP: 2, CP: 4, DistributedOptimizer: true}, replay.States{Params: 2 * psi, Grads: 4 * psi, Master: 4 * psi / 8, Optimizer: 8 * psi / 8,
			Buffers: 32 << 20}}, // TE's cuBLAS workspace: Megatron's linears are TE's (core/megatron_te.go)
	} {
		rep := evalPlan(t, distPlan(t, m, tc.prec, tc.par))
		if rep.States != tc.want {
			t.Errorf("%s: states %+v, want %+v", tc.name, rep.States, tc.want)
		}
	}
}

// endOfForward is the communication memory (gathered parameters) live
// after the last forward op.
func endOfForward(t *testing.T, p *core.Plan) int64 {
	t.Helper()
	rep, err := Evaluate(p, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	var last int64 = -1
	for _, pt := range rep.Timeline {
		if pt.Phase == replay.PhaseForward {
			last = pt.ByCat[core.CatComm]
		}
	}
	if last < 0 {
		t.Fatal("no forward in the timeline")
	}
	return last
}

// TestFSDPReshardAfterForward: between a unit's forward and its backward
// FSDP2 holds nothing of it (True), all of it unsharded (False), or 1/N of
// it in the gather dtype (N). After the last forward op of linearStack
// (eight blocks of 2 x 1024 x 4096 parameters, gathered in bf16 with
// bf16-mixed, or fp32 with param_dtype=fp32) on 8 ranks.
func TestFSDPReshardAfterForward(t *testing.T) {
	m := linearStack(8, 1024, 4096)
	block := int64(2 * 1024 * 4096)
	for _, tc := range []struct {
		name string
		par  core.Parallelism
		want int64
	}{
		{"True", core.Parallelism{DP: 8, FSDP: true}, 0},
		{"False", core.Parallelism{DP: 8, FSDP: true, NoReshard: true}, 8 * 2 * block},
		{"2", core.Parallelism{DP: 8, FSDP: true, ReshardTo: 2}, 8 * 2 * block / 2},
		{"4, cp=2", core.Parallelism{DP: 4, CP: 2, FSDP: true, ReshardTo: 4}, 8 * 2 * block / 4},
		{"False, param_dtype=fp32", core.Parallelism{DP: 8, FSDP: true, NoReshard: true, FSDPParamDType: units.FP32}, 8 * 4 * block},
	} {
		if got := endOfForward(t, distPlan(t, m, "bf16-mixed", tc.par)); got != tc.want {
			t.Errorf("reshard_after_forward=%s: %d bytes gathered after the forward, want %d", tc.name, got, tc.want)
		}
	}
}

// fsdpLM is an embedding, two linear blocks, a final norm and an untied
// output layer: 1000 x 256 + 2 x 2 x 256 x 256 + 256 + 256 x 1000.
func fsdpLM() *core.Model {
	block := &core.Sequential{Layers: []core.Layer{
		&nn.Linear{Name: "up", In: 256, Out: 256},
		&nn.Linear{Name: "down", In: 256, Out: 256},
	}}
	return &core.Model{Name: "lm", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 1000, Dim: 256},
		&core.Repeat{Name: "layers", Layer: block, N: 2},
		&nn.Norm{Name: "norm", Dim: 256, RMS: true},
	}, Vocab: 1000}
}

// TestFSDPUnits: the root unit (everything outside the blocks) stays
// gathered from its forward to its backward; wrapping the embedding and
// the output layer as units of their own (torchtune's
// custom_sharded_layers) reshards them after their forward, leaving only
// the final norm in the root.
func TestFSDPUnits(t *testing.T) {
	m := fsdpLM()
	embed, head, norm := int64(1000*256), int64(256*1000), int64(256)
	for _, tc := range []struct {
		units []string
		want  int64 // bf16 bytes gathered after the forward
	}{
		{nil, 2 * (embed + head + norm)},
		{[]string{"embed_tokens"}, 2 * (head + norm)},
		{[]string{"embed_tokens", "lm_head"}, 2 * norm},
	} {
		p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 4, FSDP: true, FSDPUnits: tc.units})
		if got := endOfForward(t, p); got != tc.want {
			t.Errorf("fsdp_units=%q: %d bytes gathered after the forward, want %d", tc.units, got, tc.want)
		}
	}
	p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 4, FSDP: true, FSDPUnits: []string{"tok_embeddings"}})
	_, err := Evaluate(p, core.Options{})
	if e, ok := err.(*units.Error); !ok || !strings.Contains(e.Msg, `fsdp_units: "tok_embeddings" names no module`) || !strings.Contains(e.Hint, `"embed_tokens", "norm", "lm_head"`) {
		t.Errorf("unknown unit: error %#v, want one naming the module and hinting at embed_tokens, norm and lm_head", err)
	}
}

// TestFSDPUnitsEveryRepeat: every block of every repeat() is a unit, not
// only the largest repeat's, as a DeepSeek-style model's dense first
// layers are wrapped beside its MoE layers (transformers'
// _no_split_modules names one decoder layer class for both; torchtitan
// shards every model.layers[i]): a lone dense block before two others is
// resharded after its forward, not left in the root.
func TestFSDPUnitsEveryRepeat(t *testing.T) {
	lin := func() core.Layer {
		return &core.Sequential{Layers: []core.Layer{&nn.Linear{Name: "up", In: 256, Out: 256}, &nn.Linear{Name: "down", In: 256, Out: 256}}}
	}
	m := &core.Model{Name: "lm", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 1000, Dim: 256},
		&core.Repeat{Name: "dense", Layer: lin(), N: 1},
		&core.Repeat{Name: "layers", Layer: lin(), N: 2},
		&nn.Norm{Name: "norm", Dim: 256, RMS: true},
	}, Vocab: 1000}
	if got, want := core.BlockPaths(m), []string{"dense.0", "layers.0", "layers.1"}; !slices.Equal(got, want) {
		t.Errorf("RepeatBlockPaths = %q, want %q", got, want)
	}
	embed, head, norm := int64(1000*256), int64(256*1000), int64(256)
	if got, want := endOfForward(t, distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 4, FSDP: true})), 2*(embed+head+norm); got != want {
		t.Errorf("%d bytes gathered after the forward, want %d (the root's alone: dense.0 is a unit of its own)", got, want)
	}
}

// TestFSDPCollectives: per step FSDP2 all-gathers the parameters twice in
// param_dtype (once with reshard_after_forward=False) and reduce-scatters
// the gradients in reduce_dtype; HSDP then all-reduces the sharded
// gradient over the replicas.
func TestFSDPCollectives(t *testing.T) {
	m := linearStack(8, 1024, 4096)
	psi := m.Params()
	for _, tc := range []struct {
		name string
		par  core.Parallelism
		want map[string]int64
	}{
		{"fsdp", core.Parallelism{DP: 8, FSDP: true}, map[string]int64{"all_gather": 2 * 2 * psi, "reduce_scatter": 4 * psi}},
		{"no reshard, bf16 reduce", core.Parallelism{DP: 8, FSDP: true, NoReshard: true, FSDPReduceDType: units.BF16}, map[string]int64{"all_gather": 2 * psi, "reduce_scatter": 2 * psi}},
		{"hsdp 2x4", core.Parallelism{DP: 8, DPReplicate: 2, FSDP: true}, map[string]int64{"all_gather": 2 * 2 * psi, "reduce_scatter": 4 * psi, "all_reduce": 4 * psi / 4}},
	} {
		rep := evalPlan(t, distPlan(t, m, "bf16-mixed", tc.par))
		got := map[string]int64{}
		for _, c := range rep.CommBytes {
			got[c.Name] = c.Bytes
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s %d bytes, want %d", tc.name, k, got[k], v)
			}
		}
	}
}

// TestFSDPLayoutErrors: impossible FSDP meshes and options are errors
// naming the numbers.
func TestFSDPLayoutErrors(t *testing.T) {
	m := linearStack(8, 1024, 4096)
	for _, tc := range []struct {
		par  core.Parallelism
		want string
	}{
		{core.Parallelism{DP: 6, DPReplicate: 4, FSDP: true}, "dp_replicate=4 does not divide dp=6"},
		{core.Parallelism{DP: 8, DPReplicate: 2}, "dp_replicate=2 is HSDP, an FSDP mesh"},
		{core.Parallelism{DP: 8, FSDP: true, ReshardTo: 3}, "reshard_after_forward=3 must divide the 8 ranks"},
		{core.Parallelism{DP: 8, FSDP: true, ReshardTo: 8}, "reshard_after_forward=8 must divide the 8 ranks"},
		{core.Parallelism{DP: 8, NoReshard: true}, "reshard_after_forward= is an FSDP option"},
		{core.Parallelism{DP: 8, FSDPUnits: []string{"x"}}, "fsdp_units= is an FSDP option"},
		{core.Parallelism{DP: 8, FSDP: true, FSDPParamDType: units.INT8}, "param_dtype and reduce_dtype must be float dtypes"},
	} {
		err := distPlan(t, m, "bf16-mixed", tc.par).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.par, err, tc.want)
		}
	}
}

// TestFSDPPipelineHoldsStage: FSDP2 under pipeline parallelism keeps every
// unit of the stage gathered and its gradients unsharded, accumulated in
// reduce_dtype, until the last micro-batch (torch.distributed.pipelining
// turns gradient sync and reshard-after-backward off before it). Each of
// the 2 stages of linearStack(8) holds half of Ψ: fp32 shards over dp=2
// (4 + 8 bytes per parameter, halved), fp32 unsharded gradients (4 bytes)
// and the bf16 unsharded parameters (2 bytes), all through the step; the
// parameters are all-gathered and the gradients reduce-scattered once per
// step.
func TestFSDPPipelineHoldsStage(t *testing.T) {
	m := linearStack(8, 1024, 4096)
	half := m.Params() / 2
	p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 2, PP: 2, FSDP: true, MicroBatches: 4})
	p.GradAccum = 4
	rep, err := Evaluate(p, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	for s, r := range rep.Ranks {
		if want := (replay.States{Params: 4 * half / 2, Grads: 4 * half, Optimizer: 8 * half / 2}); r.States != want {
			t.Errorf("stage %d: states %+v, want %+v", s, r.States, want)
		}
		got := map[string]int64{}
		for _, c := range r.CommBytes {
			got[c.Name] = c.Bytes
		}
		if got["all_gather"] != 2*half || got["reduce_scatter"] != 4*half {
			t.Errorf("stage %d: all_gather %d, reduce_scatter %d bytes per step, want %d and %d", s, got["all_gather"], got["reduce_scatter"], 2*half, 4*half)
		}
	}
	forward := 0
	for _, pt := range rep.Timeline { // the fullest stage's
		if pt.Phase != replay.PhaseForward {
			continue
		}
		forward++
		if pt.ByCat[core.CatComm] < 2*half {
			t.Fatalf("op %s: %d bytes gathered, want the stage's %d bf16 bytes held throughout", pt.Op, pt.ByCat[core.CatComm], 2*half)
		}
	}
	if forward == 0 {
		t.Fatal("no forward in the fullest stage's timeline")
	}
}

// TestFSDPPipelineChunkPostBackward: each model chunk of a stage is
// resharded and reduce-scattered after its own last micro-batch's backward
// (torch.distributed.pipelining's backward_maybe_with_nosync with
// last_backward, counted per chunk), and its unsharded gradients exist only
// from its first backward to that one. linearStack(8) over pp=2 with 2
// chunks per stage (interleaved) and 2 micro-batches: every chunk holds a
// quarter of the parameters, Q, each as fp32 unsharded gradients (4Q bytes)
// and as fp32 shards over dp=2 (2Q). Stage 1 replays chunk 1's two
// micro-batches and chunk 3's second; chunk 3's first ran its backward
// before, so only its 4Q of gradients exist in the forward. Its backward
// ends first: resharded, its 4Q become a 2Q shard, and chunk 1's 4Q
// accumulate after: the most at once is 6Q, not both chunks' 8Q. Stage 0's
// two chunks have run no backward (all four forwards in flight): no
// gradient in the forward, 6Q at most as well. After the backward both
// chunks hold their 2Q shards and nothing unsharded. With keep_grads
// (zero_grad(set_to_none=False)) both chunks' 2Q shards stay from the last
// step: 4Q more in the forward, 8Q at most on either stage.
func TestFSDPPipelineChunkPostBackward(t *testing.T) {
	m := linearStack(8, 1024, 4096)
	q := m.Params() / 4
	for _, tc := range []struct {
		keep bool
		want [2]struct{ forward, most, after int64 }
	}{
		{false, [2]struct{ forward, most, after int64 }{{0, 6 * q, 4 * q}, {4 * q, 6 * q, 4 * q}}},
		{true, [2]struct{ forward, most, after int64 }{{4 * q, 8 * q, 4 * q}, {8 * q, 8 * q, 4 * q}}},
	} {
		p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 2, PP: 2, FSDP: true, MicroBatches: 2, Schedule: "interleaved", VirtualStages: 2})
		p.GradAccum, p.KeepGrads = 2, tc.keep
		checkPipelineGrads(t, p, tc.want)
	}
}

// checkPipelineGrads checks the gradient bytes of each stage of p in its
// forward (constant), at most, and at the optimizer step.
func checkPipelineGrads(t *testing.T, p *core.Plan, want [2]struct{ forward, most, after int64 }) {
	t.Helper()
	rep, err := Evaluate(p, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range want {
		r := rep.Ranks[s]
		var fwd, most, after int64 = -1, 0, -1
		for _, pt := range r.Timeline {
			g := pt.ByCat[core.CatGrads]
			most = max(most, g)
			switch pt.Phase {
			case replay.PhaseForward:
				if fwd >= 0 && g != fwd {
					t.Errorf("keep_grads=%v, stage %d: gradients %d then %d bytes in the forward, want %d throughout", p.KeepGrads, s, fwd, g, want.forward)
				}
				fwd = g
			case replay.PhaseOptimizer:
				after = g
			}
		}
		if fwd != want.forward || most != want.most || after != want.after {
			t.Errorf("keep_grads=%v, stage %d: gradients %d bytes in the forward, %d at most, %d at the optimizer step; want %d, %d, %d",
				p.KeepGrads, s, fwd, most, after, want.forward, want.most, want.after)
		}
	}
}

// TestFrozenGathers: ZeRO-3 and FSDP gather the frozen weights they shard
// as the trainable ones, in the forward and again in the backward (the
// input's gradient reads them), with no gradient to reduce: a LoRA run's
// base weights. DPO's reference copy (run under no_grad) is gathered in
// its forward alone. The small Llama of dpoPlan has 38,308,352 parameters
// (TestDPOFSDP2's count), bf16; LoRA of rank 8 on q (512 -> 512) and v
// (512 -> 128) adds 8 x (1,024 + 640) = 13,312 a layer, 26,624 in all.
// FSDP's root unit (the embedding, the head and the final norm: 2 x
// 32,000 x 512 + 512) is not resharded after forward: gathered once.
func TestFrozenGathers(t *testing.T) {
	const llama, adapters, root = 38_308_352, 26_624, 2*32_000*512 + 512
	for _, par := range []core.Parallelism{{DP: 8, FSDP: true}, {DP: 8, Zero: 3}} {
		p := dpoPlan(core.RefAdapters, core.TRLLogits)
		p.Preference, p.Parallel = nil, par
		rep := evalPlan(t, p)
		once := int64(0)
		if par.FSDP {
			once = root
		}
		if got, want := commBytes(rep, "all_gather"), 2*(2*(llama+adapters-once)+once); got != want {
			t.Errorf("%s with LoRA: all_gather %d bytes, want %d (the frozen base weights and the adapters, forward and backward)", par, got, want)
		}
		if got, want := commBytes(rep, "reduce_scatter"), int64(2*adapters); got != want {
			t.Errorf("%s with LoRA: reduce_scatter %d bytes, want %d (the adapters' gradients alone)", par, got, want)
		}
	}
	for _, ref := range []string{core.RefModel, core.RefPrecomputed} {
		p := dpoPlan(ref, core.TRLLogits)
		p.Parallel = core.Parallelism{DP: 4, Zero: 3}
		want := int64(2 * 2 * llama) // the policy, forward and backward
		if ref == core.RefModel {
			want += 2 * llama // the reference copy, its forward alone
		}
		if got := commBytes(evalPlan(t, p), "all_gather"); got != want {
			t.Errorf("DPO under ZeRO-3, reference %s: all_gather %d bytes, want %d", ref, got, want)
		}
	}
}
