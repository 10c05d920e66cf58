package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// SEEDS.md story 3: activation checkpointing costs ~30 % more time (a
// backward costs ~2 forwards, so re-running the forward adds ~1/3).
func TestFullCheckpointingCostsAboutAThird(t *testing.T) {
	m := testmodels.Llama(4096, 32, 32, 32, 11008, 32000, "flash")
	none, err := Evaluate(testmodels.LlamaPlan(m, 1, 4096, "bf16-mixed", "none", "H100-80GB"), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	full, err := Evaluate(testmodels.LlamaPlan(m, 1, 4096, "bf16-mixed", "full", "H100-80GB"), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ratio := full.Time.StepSeconds / none.Time.StepSeconds
	if ratio < 1.2 || ratio > 1.4 {
		t.Errorf("full checkpointing step time ratio %.3f, want about 1.3", ratio)
	}
	if full.Time.MFU >= none.Time.MFU || full.Time.HFU <= full.Time.MFU {
		t.Errorf("recompute must lower MFU and count in HFU: none mfu %.3f, full mfu %.3f hfu %.3f", none.Time.MFU, full.Time.MFU, full.Time.HFU)
	}
	// One H100 running a 7B step at batch 1 x 4096: MFU of a well-fed
	// single GPU lies in the 35-55 % band of story 3.
	if none.Time.MFU < 0.3 || none.Time.MFU > 0.6 {
		t.Errorf("single-GPU MFU %.3f outside a plausible band", none.Time.MFU)
	}
}
