package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// moePlan is a Mixtral-style block stack (8 experts, top 2) on dp GPUs
// with expert parallelism ep, the busiest rank receiving load balanced
// shares of the routed rows (parallel(expert_load=)).
func moePlan(dp, ep int64, dispatch string, load float64) *core.Plan {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: 2048, RMS: true},
			&nn.Attention{Name: "self_attn", Dim: 2048, Heads: 16, KVHeads: 4, Impl: "flash", Causal: true, Rope: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: 2048, RMS: true},
			&nn.MoE{Name: "mlp", Dim: 2048, Hidden: 5632, Experts: 8, TopK: 2, Act: "swiglu"},
		}}},
	}}
	m := &core.Model{Name: "moe", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 32000, Dim: 2048},
		&core.Repeat{Name: "layers", Layer: block, N: 4},
		&nn.Norm{Name: "norm", Dim: 2048, RMS: true},
	}, Vocab: 32000, Loss: "cross_entropy"}
	p := testmodels.LlamaPlan(m, 2, 4096, "megatron", "none", "H100-80GB")
	p.Overheads.Dispatch = dispatch
	if dp > 1 {
		p.Parallel = core.Parallelism{DP: dp, EP: ep, ExpertLoad: load, DistributedOptimizer: true}
	}
	return p
}

// moduleSeconds is the seconds of r.modules' row name.
func moduleSeconds(t *testing.T, p *core.Plan, name string) (float64, float64) {
	t.Helper()
	r, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sec, ep float64
	for _, m := range r.Time.Modules {
		switch m.Name {
		case name:
			sec = m.Seconds
		case "ep_comm":
			ep = m.Seconds
		}
	}
	return sec, ep
}

// With expert parallelism the busiest rank sets the pace: expert_load
// sizes its routed rows (the memory replay's shapes), so its expert GEMMs
// and all four all-to-alls (dispatch and combine, forward and backward)
// take about expert_load times longer, and the memory of the experts'
// activations grows with them.
func TestExpertLoadSetsThePace(t *testing.T) {
	experts := "layers.*.mlp.experts"
	bal, balEP := moduleSeconds(t, moePlan(8, 8, "fused", 1), experts)
	hot, hotEP := moduleSeconds(t, moePlan(8, 8, "fused", 1.5), experts)
	if bal <= 0 || balEP <= 0 {
		t.Fatalf("no expert or all-to-all time: %g %g", bal, balEP)
	}
	if r := hot / bal; r < 1.4 || r > 1.5+1e-9 {
		t.Errorf("experts at imbalance 1.5: %.3fx the balanced time, want about 1.5x", r)
	}
	if r := hotEP / balEP; r < 1.3 || r > 1.5+1e-9 {
		t.Errorf("all-to-all at imbalance 1.5: %.3fx the balanced time, want about 1.5x", r)
	}
	worst, worstEP := moduleSeconds(t, moePlan(8, 8, "fused", 4), experts) // ep x min(top_k, experts/ep) / top_k = 4
	if r := worst / bal; math.Abs(r-4) > 0.4 {
		t.Errorf("experts at the worst load 4: %.3fx the balanced time, want about 4x", r)
	}
	if r := worstEP / balEP; r < 3 || r > 4+1e-9 {
		t.Errorf("all-to-all at the worst load 4: %.3fx the balanced time, want about 4x", r)
	}
	one, _ := moduleSeconds(t, moePlan(1, 1, "fused", 0), experts)
	// Hugging Face's expert loop launches a GEMM per expert; the grouped
	// kernel one: eager dispatch costs more CPU on the experts.
	eager, _ := moduleSeconds(t, moePlan(1, 1, "eager", 1), experts)
	if eager < one {
		t.Errorf("the per-expert loop (%g s) is faster than the grouped GEMM (%g s)", eager, one)
	}
}
