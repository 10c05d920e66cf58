package hf

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// setExperts copies each MoE block once, however many parents share it,
// and leaves the blocks the family built as they were: both kinds, the
// routed MoE and Gemma 4's experts.
func TestSetExpertsCopies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		experts string
		want    string
	}{
		{"grouped_mm", "grouped_mm", nn.MoEGroupedMM},
		{"eager", "eager", nn.MoEFusedLoop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moe := &nn.MoE{Name: "block_sparse_moe", Dim: 8, Hidden: 16, Experts: 4, TopK: 2, Act: "swiglu", WNames: true}
			g4 := &nn.Gemma4MoE{Dim: 8, Hidden: 16, Experts: 4, TopK: 2, Act: "geglu"}
			block := &core.Sequential{Layers: []core.Layer{moe, &nn.Parallel{Branches: []core.Layer{g4}}}}
			layers := []core.Layer{block, &core.Sequential{Layers: []core.Layer{block}}, &core.Repeat{Layer: block, N: 2}}
			ex := &hfExperts{block: "mlp", router: "gate", weightsFP32: true, noWNames: true, keepRouterSince: keepGateSince, keepScoreBias: true}
			if n := setExperts(layers, ex, tc.experts, keepGateSince); n != 2 {
				t.Errorf("rebuilt %d blocks, want 2 (one of each kind)", n)
			}
			if moe.Impl != "" || moe.Name != "block_sparse_moe" || !moe.WNames || g4.Impl != "" {
				t.Errorf("the built blocks changed: %+v, %+v", moe, g4)
			}
			m, ok := block.Layers[0].(*nn.MoE)
			if !ok || m == moe || m.Impl != tc.want || m.Name != "mlp" || m.RouterName != "gate" || !m.WeightsFP32 || m.WNames || !m.SentinelsEP || !m.KeepRouterFP32 || !m.KeepScoreBiasFP32 {
				t.Errorf("MoE copy %+v", block.Layers[0])
			}
			g, ok := block.Layers[1].(*nn.Parallel).Branches[0].(*nn.Gemma4MoE)
			if !ok || g == g4 || g.Impl != tc.want {
				t.Errorf("Gemma4MoE copy %+v", block.Layers[1].(*nn.Parallel).Branches[0])
			}
		})
	}
}
