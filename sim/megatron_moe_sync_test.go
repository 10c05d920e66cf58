package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/timing"
)

// megatronMoEPlan is a 2-layer MoE (8 experts, top 2) under Megatron-Core's
// grouped experts and alltoall dispatcher, with full recompute and layout
// par (zero: one GPU); capacity > 0 is a capacity factor with padding.
func megatronMoEPlan(par core.Parallelism, capacity float64) *core.Plan {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: 1024, RMS: true},
			&nn.Attention{Name: "self_attn", Dim: 1024, Heads: 8, KVHeads: 8, Impl: "flash", Causal: true, Rope: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: 1024, RMS: true},
			&nn.MoE{Name: "mlp", Dim: 1024, Hidden: 2048, Experts: 8, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped, Capacity: capacity},
		}}},
	}}
	m := &core.Model{Name: "moe", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 32000, Dim: 1024},
		&core.Repeat{Name: "layers", Layer: block, N: 2},
		&nn.Norm{Name: "norm", Dim: 1024, RMS: true},
	}, Vocab: 32000, Loss: "cross_entropy"}
	p := testmodels.LlamaPlan(m, 1, 2048, "megatron", "full", "H100-80GB")
	p.Parallel = par
	return p
}

// TestMegatronMoESyncs counts, by hand from Megatron-Core's code
// (nn/moe_megatron_sync.go), the host syncs of a 2-layer MoE's forward
// and where they sit: the dispatcher's one a layer ("before_ep_alltoall"
// on the permute with ep or expert tp > 1, "before_finish" on the chunk
// sort before the experts at ep 1, "before_permutation_2" on the permute
// without permute fusion), two masked_selects more a layer without
// permute fusion (0.13: both in the permute; 0.12, unpermute_probs: one
// in the unpermute), none with drop-and-pad. Full recompute reruns every
// one (they are all in checkpointed regions); the backward makes none
// (the IR places syncs on forward ops only, and these layers' backward
// reuses the host's split sizes).
func TestMegatronMoESyncs(t *testing.T) {
	ep2 := core.Parallelism{DP: 2, EP: 2, DistributedOptimizer: true}
	tp2 := core.Parallelism{TP: 2, SequenceParallel: true, DistributedOptimizer: true}
	unfused := func(p core.Parallelism, old bool) core.Parallelism {
		p.NoPermuteFusion, p.UnpermuteProbs = true, old
		return p
	}
	for _, c := range []struct {
		name     string
		par      core.Parallelism
		capacity float64
		want     map[string]int32 // syncs a layer by op name
	}{
		{"one GPU, before_finish after the probs' chunk sort", core.Parallelism{}, 0, map[string]int32{"sort_chunks_probs": 1}},
		{"ep 2, before_ep_alltoall", ep2, 0, map[string]int32{"permute": 1}},
		{"tp 2 (expert tp 2), before_ep_alltoall", tp2, 0, map[string]int32{"permute": 1}},
		{"ep 2 unfused, 0.13: two masked_selects in the permute", unfused(ep2, false), 0, map[string]int32{"permute": 3}},
		{"ep 2 unfused, 0.12: one in the permute, one in the unpermute", unfused(ep2, true), 0, map[string]int32{"permute": 2, "unpermute": 1}},
		{"one GPU unfused, before_permutation_2", unfused(core.Parallelism{}, false), 0, map[string]int32{"permute": 3}},
		{"ep 2, drop and pad: no_sync", ep2, 1.25, map[string]int32{}},
		{"ep 2 unfused, drop and pad: no_sync", unfused(ep2, false), 1.25, map[string]int32{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prog, err := megatronMoEPlan(c.par, c.capacity).LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int32{}
			var total, inRegion int32
			for i := range prog.Ops {
				op := &prog.Ops[i]
				if op.Syncs == 0 {
					continue
				}
				if !strings.Contains(op.Name, ".mlp.") && !strings.HasPrefix(op.Name, "layers.") {
					t.Errorf("%s: a sync outside the MoE layers", op.Name)
				}
				got[op.Name[strings.LastIndexByte(op.Name, '.')+1:]] += op.Syncs
				total += op.Syncs
				if op.Region != 0 {
					inRegion += op.Syncs
				}
			}
			var want int32
			for name, n := range c.want {
				want += 2 * n
				if got[name] != 2*n {
					t.Errorf("%s: %d syncs over the 2 layers, want %d", name, got[name], 2*n)
				}
			}
			if total != want {
				t.Errorf("%d syncs a forward (%v), want %d", total, got, want)
			}
			// Full recompute: each sync again in the backward's recompute,
			// at its latency (timing/host_sync.go).
			var ct timing.ComputeTime
			timing.SyncsOf(&ct, prog, make([]timing.OpCost, len(prog.Ops)), func(i int) bool { return prog.Ops[i].Region != 0 })
			if inRegion != total || ct.Syncs != float64(2*total) {
				t.Errorf("forward and recompute: %.0f syncs (%d in checkpointed regions), want %d", ct.Syncs, inRegion, 2*total)
			}
		})
	}
}
