package search

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// checkAll checks its layouts through a core.LayoutMemo per worker
// (RefusalIn): every layout of Llama-3-70B's space on 1,024 GPUs, of a
// small MoE's on 8 and 64 GPUs (expert parallelism's refusals) and of
// Llama 3 405B's on 16,384 (pipeline splits of 126 layers), checked in
// the enumeration's order and in a shuffled one through one memo, gets
// RefusalFor's verdict: nil where it is nil, else the same error (its
// type, class and words).
func TestRefusalInAsRefusalFor(t *testing.T) {
	moe := testmodels.LlamaPlan(smallMoE(), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	for _, c := range []struct {
		name  string
		base  *core.Plan
		space Space
	}{
		{"70B", testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB"), Space{GPUs: 1024, GlobalBatch: 1024, Workers: 1}},
		{"MoE 8", moe, Space{GPUs: 8, GlobalBatch: 16, Workers: 1}},
		{"MoE 64", moe, Space{GPUs: 64, GlobalBatch: 128, Workers: 1}},
		{"405B", testmodels.LlamaPlan(llama3_405B(), 1, 8192, "megatron", "none", "H100-80GB"), Space{GPUs: 16384, GlobalBatch: 2048, Workers: 1}},
	} {
		sp, err := c.space.defaults(c.base)
		if err != nil {
			t.Fatal(err)
		}
		layouts, _, err := sp.enumerate(c.base)
		if err != nil {
			t.Fatal(err)
		}
		if testing.Short() && len(layouts) > 20000 {
			layouts = layouts[:20000]
		}
		order := rand.New(rand.NewSource(43)).Perm(len(layouts))
		refused, classes := 0, map[string]bool{}
		for pass, at := range [][]int{nil, order} {
			var memo core.LayoutMemo
			for k := range layouts {
				i := k
				if at != nil {
					i = at[k]
				}
				var p core.Plan
				sp.planInto(&p, c.base, layouts[i])
				want, got := p.RefusalFor(c.base.Model), p.RefusalIn(c.base.Model, &memo)
				if (want == nil) != (got == nil) || want != nil && (reflect.TypeOf(want) != reflect.TypeOf(got) || units.Worded(want).Error() != units.Worded(got).Error() || reasonOf(want) != reasonOf(got)) {
					t.Fatalf("%s, pass %d, %s: RefusalIn %v, RefusalFor %v", c.name, pass, p.Parallel.Norm(), got, want)
				}
				if want != nil && pass == 0 {
					refused++
					classes[reasonOf(want)] = true
				}
			}
		}
		t.Logf("%s: %d layouts, %d refused, %d reasons", c.name, len(layouts), refused, len(classes))
		if refused == 0 || refused == len(layouts) {
			t.Errorf("%s: %d of %d layouts refused: the comparison meets one verdict only", c.name, refused, len(layouts))
		}
	}
}
