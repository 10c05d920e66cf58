package sim

import (
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestKeepLogits: a loop that holds the model's output through the
// backward (out = model(...); out.loss.backward(); del out) keeps the logits,
// batch x seq x vocab in the compute dtype, on top of what the loss's
// backward holds at its peak (the fp32 log-probabilities and the two fp32
// gradients); a loop that drops them (the HF Trainer) does not.
func TestKeepLogits(t *testing.T) {
	data, err := os.ReadFile("testdata/cuda_h200/configs/llama-3.2-1b.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		precision   string
		batch, seq  int64
		logitsBytes int64 // batch x seq x vocab x 2 (bf16 logits, also under autocast)
	}{
		{"bf16", 2, 2048, 2 * 2048 * 128_256 * 2},
		{"bf16", 4, 2048, 4 * 2048 * 128_256 * 2},
		{"bf16-mixed", 4, 2048, 4 * 2048 * 128_256 * 2},
	} {
		p := &core.Plan{Model: m, Batch: tc.batch, Seq: tc.seq, GradAccum: 1, Members: 1, Precision: mustPrecision(t, tc.precision),
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda")}
		base := evalPlan(t, p)
		kept := *p
		kept.KeepLogits = true
		r := evalPlan(t, &kept)
		if base.PeakAt.Op != "loss.cross_entropy" || r.PeakAt.Op != "loss.cross_entropy" {
			t.Fatalf("%s %dx%d: peaks at %s and %s, want the loss's backward", tc.precision, tc.batch, tc.seq, base.PeakAt.Op, r.PeakAt.Op)
		}
		// Both steady steps run in the cache their first step left
		// (replay/lazy_states.go), where a request takes a cached block
		// whole when less than 1 MiB of it would remain (kSmallSize in
		// c10/cuda/CUDACachingAllocator.cpp): the peaks may differ by a
		// block's remainder beside the logits.
		if got := r.PeakAllocated - base.PeakAllocated; got < tc.logitsBytes-2<<20 || got > tc.logitsBytes+2<<20 {
			t.Errorf("%s %dx%d: keep_logits adds %d B to the peak, want the logits' %d (within 2 MiB)", tc.precision, tc.batch, tc.seq, got, tc.logitsBytes)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(p *core.Plan)
		err  string
	}{
		{"loss_chunks", func(p *core.Plan) { p.LossChunks = 8 }, "loss_chunks makes none whole"},
		{"liger", func(p *core.Plan) { p.FusedLoss = "0.6.4" }, "loss_chunks makes none whole"},
		{"no head", func(p *core.Plan) {
			base, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Arch: "LlamaModel"})
			if err != nil {
				t.Fatal(err)
			}
			p.Model = base
		}, "has none"},
	} {
		p := &core.Plan{Model: m, Batch: 1, Seq: 128, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda"), KeepLogits: true}
		tc.edit(p)
		_, err := Evaluate(p, core.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.err)
		}
	}
}
