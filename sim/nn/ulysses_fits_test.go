package nn

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestAttentionFitsLayout: FitsLayout says what CheckLayout's error says
// (core.LayoutFitter), over heads and key-value heads that tp and cp
// divide and that they do not, in every cp mode and none; the grid holds
// layouts of each kind (accepted, refused by tp, by Ulysses' heads, by
// its key-value heads).
func TestAttentionFitsLayout(t *testing.T) {
	kinds := map[string]int{}
	for _, heads := range []int64{1, 6, 8, 12, 64, 128} {
		for _, kv := range []int64{0, 1, 2, 8} {
			a := &Attention{Dim: 128 * heads, Heads: heads, KVHeads: kv}
			for _, tp := range []int64{0, 1, 2, 3, 4, 8, 16} {
				for _, cp := range []int64{0, 1, 2, 3, 4, 8, 16} {
					for _, mode := range []string{"", "ring", "ulysses", "allgather"} {
						par := core.Parallelism{TP: tp, CP: cp, CPMode: mode}
						err := a.CheckLayout("layers.0.attn", par)
						if fits := a.FitsLayout(par); fits != (err == nil) {
							t.Errorf("heads %d kv %d %v: FitsLayout %v, CheckLayout %v", heads, kv, par, fits, err)
						}
						switch {
						case err == nil:
							kinds["fits"]++
						case a.checkTP("", max(tp, 1)) != nil:
							kinds["tp"]++
						default:
							_, _, kvRefused, _ := a.ulyssesSplit(par)
							kinds[map[bool]string{false: "heads", true: "kv"}[kvRefused]]++
						}
					}
				}
			}
		}
	}
	for _, k := range []string{"fits", "tp", "heads", "kv"} {
		if kinds[k] == 0 {
			t.Errorf("no layout of kind %q in the grid (%v)", k, kinds)
		}
	}
}
