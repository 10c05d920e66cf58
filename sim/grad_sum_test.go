package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestTiedGradientSums: a tied embedding (256 x 64, bf16: W = 32,768 B)
// read by the embedding and by its output head run in 2 chunks gets three
// gradients in one backward, summed out of place in the AccumulateGrad
// node's input buffer: the backward meets the second chunk (the last in
// the forward) first and keeps its gradient (W); the first chunk's
// gradient and the sum are made while the running sum lives (3W, 2W of
// them gradients), then the old sum and the chunk's gradient are freed;
// the embedding's gradient likewise. So the gradients reach 2W = 65,536 B
// in the backward and end at W; one gradient (W) is a temporary besides.
// Untied, the head and the embedding get one gradient each: 2W, never
// more.
func TestTiedGradientSums(t *testing.T) {
	for _, tied := range []bool{true, false} {
		m := &core.Model{Name: "tied", Layers: []core.Layer{&nn.Embedding{Name: "embed", Rows: 256, Dim: 64}},
			Vocab: 256, Loss: "cross_entropy", TieEmbeddings: tied}
		p := testmodels.LlamaPlan(m, 1, 64, "bf16", "none", "H100-80GB")
		p.LossChunks = 2
		r, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		var most, last int64
		for _, pt := range r.Timeline {
			if pt.Phase == replay.PhaseBackward {
				most = max(most, pt.ByCat[core.CatGrads])
				last = pt.ByCat[core.CatGrads]
			}
		}
		if want := int64(65536); most != want || last != want/map[bool]int64{true: 2, false: 1}[tied] {
			t.Errorf("tied %v: gradients reach %d B in the backward and end at %d B; want %d and %d", tied, most, last, want, want/map[bool]int64{true: 2, false: 1}[tied])
		}
	}
}

// TestZeroGradZeros: zero_grad(set_to_none=False) zeroes the gradients in
// place, so they are allocated through the next forward: in the tied
// model above (one 256 x 64 bf16 weight, W = 32,768 B) every point of the
// forward holds W of gradients; with set_to_none=True, none.
func TestZeroGradZeros(t *testing.T) {
	for _, keep := range []bool{false, true} {
		m := &core.Model{Name: "tied", Layers: []core.Layer{&nn.Embedding{Name: "embed", Rows: 256, Dim: 64}},
			Vocab: 256, Loss: "cross_entropy", TieEmbeddings: true}
		p := testmodels.LlamaPlan(m, 1, 64, "bf16", "none", "H100-80GB")
		p.KeepGrads = keep
		r, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]int64{false: 0, true: 32768}[keep]
		n := 0
		for _, pt := range r.Timeline {
			if pt.Phase == replay.PhaseForward {
				n++
				if pt.ByCat[core.CatGrads] != want {
					t.Fatalf("zero_grad zeros %v: %d B of gradients at %s in the forward, want %d", keep, pt.ByCat[core.CatGrads], pt.Op, want)
				}
			}
		}
		if n == 0 {
			t.Fatal("no point of the forward in the timeline")
		}
	}
}
