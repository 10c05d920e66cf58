package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestQuantSkippedExperts: bitsandbytes replaces nn.Linear modules, so
// quant= reaches the experts of transformers 4.x's per-expert loop and
// not 3-D expert parameters (transformers 5's fused loop and grouped_mm,
// Megatron's grouped GEMM): those stay in the params dtype, and the
// report says which blocks, once each (nn/moe.go, QuantSkipped).
func TestQuantSkippedExperts(t *testing.T) {
	for _, tc := range []struct {
		impl  string
		quant string
		note  string // "" = no note
	}{
		{nn.MoELoop, "nf4", ""},
		{nn.MoEFusedLoop, "nf4", `quant="nf4" replaces nn.Linear modules only: the experts of 2 MoE blocks (layers.0.moe, layers.1.moe) are 3-D parameters`},
		{nn.MoEGroupedMM, "nf4-dq", `quant="nf4-dq" replaces nn.Linear modules only: the experts of 2 MoE blocks (layers.0.moe, layers.1.moe)`},
		{nn.MoEGroupedMM, "", ""},
	} {
		t.Run(tc.impl+"/"+tc.quant, func(t *testing.T) {
			const d = 64
			moe := &nn.MoE{Name: "moe", Dim: d, Hidden: 32, Experts: 4, TopK: 2, Act: "swiglu", Impl: tc.impl}
			block := &core.Sequential{Layers: []core.Layer{&nn.Linear{Name: "proj", In: d, Out: d}, moe}}
			m := &core.Model{Name: "m", Layers: []core.Layer{&nn.Embedding{Name: "embed", Rows: 100, Dim: d},
				&core.Repeat{Name: "layers", Layer: block, N: 2}, &nn.Linear{Name: "head", In: d, Out: 100}}, Vocab: 100}
			p := tinyPlan(t, m)
			p.Precision = mustPrecision(t, "bf16")
			p.Quant = tc.quant
			if tc.quant != "" {
				p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
			}
			r := evalPlan(t, p)
			notes := strings.Join(r.Notes, "\n")
			switch {
			case tc.note == "" && strings.Contains(notes, "replaces nn.Linear modules only"):
				t.Errorf("a note where quant= reaches every expert: %s", notes)
			case tc.note != "" && !strings.Contains(notes, tc.note):
				t.Errorf("notes %q, want %q", notes, tc.note)
			}
		})
	}
}
