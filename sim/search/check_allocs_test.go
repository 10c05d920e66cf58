package search

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestCheckLayoutAllocatesNothing: checkAll builds each layout's plan on
// its worker's stack and checks it; the check must not make the plan
// escape (a *core.Plan handed to an interface method does: one 2 KB heap
// copy a layout, which doubled BenchmarkSearchLlama405B16384's bytes,
// 0.56 -> 1.03 GB an op, and cost it 6 % of its time until
// core.PackingChecker took a core.Packing value). Counted with
// testing.AllocsPerRun over the first valid layouts of Llama-3-70B's space
// on 1,024 GPUs.
func TestCheckLayoutAllocatesNothing(t *testing.T) {
	base := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	sp, err := Space{GPUs: 1024, GlobalBatch: 1024, Top: 10, Workers: 1}.defaults(base)
	if err != nil {
		t.Fatal(err)
	}
	layouts, _, err := sp.enumerate(base)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, l := range layouts {
		if checked == 20 {
			break
		}
		p := sp.planOf(base, l)
		if p.RefusalFor(base.Model) != nil {
			continue
		}
		checked++
		allocs := testing.AllocsPerRun(10, func() {
			var p core.Plan
			sp.planInto(&p, base, l)
			if err := p.RefusalFor(base.Model); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: checking the layout's plan allocates %.0f times, want 0 (does the plan escape? go build -gcflags=-m ./sim/search)", p.Parallel.Norm(), allocs)
		}
	}
	if checked == 0 {
		t.Fatal("no valid layout among the space's")
	}
}
