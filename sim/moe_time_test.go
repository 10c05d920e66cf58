package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// moePlan is a Mixtral-style block stack (8 experts, top 2) on dp GPUs
// with expert parallelism ep.
func moePlan(dp, ep int64, dispatch string, imbalance float64) *core.Plan {
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
	p.Overheads.Dispatch, p.Overheads.ExpertImbalance = dispatch, imbalance
	if dp > 1 {
		p.Parallel = core.Parallelism{DP: dp, EP: ep, DistributedOptimizer: true}
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

// With expert parallelism the busiest rank sets the pace: its expert
// GEMMs and all-to-alls take expert_imbalance times longer. On one GPU
// (no all-to-all) the imbalance costs nothing: the grouped GEMM does the
// same rows.
func TestExpertImbalance(t *testing.T) {
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
	one, _ := moduleSeconds(t, moePlan(1, 1, "fused", 1), experts)
	oneHot, _ := moduleSeconds(t, moePlan(1, 1, "fused", 1.5), experts)
	if math.Abs(oneHot/one-1) > 1e-12 {
		t.Errorf("one GPU: imbalance changed the experts' time %g -> %g", one, oneHot)
	}
	// Hugging Face's expert loop launches a GEMM per expert; the grouped
	// kernel one: eager dispatch costs more CPU on the experts.
	eager, _ := moduleSeconds(t, moePlan(1, 1, "eager", 1), experts)
	if eager < one {
		t.Errorf("the per-expert loop (%g s) is faster than the grouped GEMM (%g s)", eager, one)
	}
}
