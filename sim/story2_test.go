package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// SEEDS.md story 2: "7B parameters: ~28 GB of weights in FP32, ~14 GB in
// FP16/BF16", read off the replay's model states for Llama-2-7B
// (6,738,415,616 params: 26.95 GB and 13.48 GB, "~28" and "~14" for a round
// 7B).
func TestStory2WeightBytes(t *testing.T) {
	m := testmodels.Llama(4096, 32, 32, 32, 11008, 32000, "flash")
	if m.Params() != 6_738_415_616 {
		t.Fatalf("params %d", m.Params())
	}
	for _, c := range []struct {
		precision string
		bytes     int64
	}{
		{"fp32", 4 * 6_738_415_616},
		{"bf16", 2 * 6_738_415_616},
		{"bf16-mixed", 4 * 6_738_415_616}, // autocast keeps fp32 weights
	} {
		rep, err := Evaluate(testmodels.LlamaPlan(m, 1, 512, c.precision, "full", "H200"), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.States.Params != c.bytes {
			t.Errorf("%s: weights %d B, want %d", c.precision, rep.States.Params, c.bytes)
		}
		// Per 7.0e9 parameters, the article's round figures.
		per7B := float64(rep.States.Params) / float64(m.Params()) * 7e9 / 1e9
		if c.precision == "bf16" && per7B != 14 || c.precision == "fp32" && per7B != 28 {
			t.Errorf("%s: %.1f GB per 7B parameters", c.precision, per7B)
		}
	}
}

// Story 2's example query: a 13B model, bf16 mixed precision, micro-batch 4,
// gradient checkpointing, answered with a per-category breakdown that sums
// to the peak. (ZeRO-3 on 8 GPUs is examples/zero_13b.star.)
func TestStory2Breakdown13B(t *testing.T) {
	m := testmodels.Llama(5120, 40, 40, 40, 13824, 32000, "flash")
	if m.Params() != 13_015_864_320 {
		t.Fatalf("Llama-2-13B params %d", m.Params())
	}
	rep, err := Evaluate(testmodels.LlamaPlan(m, 4, 4096, "bf16-mixed", "full", "H100-80GB"), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, s := range rep.Categories() {
		sum += s.Bytes
	}
	if sum != rep.PeakAllocated || rep.Category("params") == 0 || rep.Category("optimizer") == 0 {
		t.Errorf("breakdown %+v does not add up to the peak %d", rep.Breakdown, rep.PeakAllocated)
	}
	// One 80 GB GPU cannot hold 13B x 16 B of model states.
	if rep.Fits {
		t.Error("13B with AdamW on one H100 must not fit")
	}
}
