package search

import (
	"context"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestSearchRefusesMuon: the block profiles price the optimizer's step by
// its traffic alone, where Muon adds each matrix's Newton-Schulz products
// (and Megatron's gathers of the TP shards, its layer-wise optimizer's
// ownership of whole matrices). Against brute force
// (sameAsBruteForce) the small Llama's fast path was 11.0 ms a step and
// its replay 13.0 ms (bf16-mixed, torch's Muon, dp 8, micro-batch 2), and
// under Megatron's Muon at tp 4 x pp 2 72.8 and 76.8 ms: search() refuses
// Muon, sweep() evaluates it.
func TestSearchRefusesMuon(t *testing.T) {
	for _, prec := range []string{"bf16-mixed", "megatron"} {
		base := testmodels.LlamaPlan(testmodels.Llama(1024, 4, 16, 4, 2816, 32000, "flash"), 1, 1024, prec, "none", "H100-80GB")
		base.Optimizer = core.Optimizer{Kind: core.Muon, Impl: "foreach", Momentum: 0.9, NSSteps: 5}
		space := Space{GPUs: 8, GlobalBatch: 16, TP: []int64{1}, PP: []int64{1}, CP: []int64{1}, MicroBatch: []int64{1}, Checkpoint: []string{"none"}, Top: 1}
		_, err := Run(context.Background(), base, space)
		if err == nil || !strings.Contains(err.Error(), "a plan with muon() is not supported") {
			t.Errorf("%s: error %v, want search's refusal of muon()", prec, err)
		}
	}
}
