package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// TestEagerMaskOnceAForward: under eager attention transformers 5.25.0
// builds one float mask a forward (masking_utils' eager_mask) and hands
// it to every layer, which adds it to its scores: at batch 2 x 64 tokens
// a (2, 1, 64, 64) bf16 tensor of 16,384 bytes (a forward pre-hook on
// LlamaDecoderLayer of llama-gqa-tiny, bf16, torch 2.15.0: kwargs
// attention_mask, with and without an all-ones attention_mask; under
// SDPA it is None). The add saves nothing, so without checkpointing the
// saved bytes do not change (TestSlidingWindowMask's eager rows and
// TestGemmaNormSavesAsTransformers hold them exact); under full
// checkpointing the mask is every checkpointed layer's argument and the
// step holds it into the backward: one storage, whatever the depth (2
// and 3 layers here).
func TestEagerMaskOnceAForward(t *testing.T) {
	full, err := core.ParseCheckpoint("full")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		layers     int64
		checkpoint bool
		more       int64 // saved bytes the mask adds
	}{
		{1, false, 0},
		{2, false, 0},
		{2, true, 16_384},
		{3, true, 16_384},
	} {
		saved := func(mask bool) int64 {
			m, err := hf.FromConfigOptions(withLayers(t, "llama-gqa-tiny.json", tc.layers), hf.Options{Attn: "eager", Transformers: "5.25.0"})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range m.Layers {
				setEagerMask(l, mask)
			}
			p := tinyPlan(t, m)
			p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 64
			if tc.checkpoint {
				p.Checkpoint = full
			}
			return evalPlan(t, p).SavedActivations
		}
		if got := saved(true) - saved(false); got != tc.more {
			t.Errorf("%d layers, checkpoint %v: the mask adds %d saved bytes, want %d", tc.layers, tc.checkpoint, got, tc.more)
		}
	}
}

func setEagerMask(l core.Layer, on bool) {
	if a, ok := l.(*nn.Attention); ok {
		a.EagerMask = on
	}
	for _, c := range l.Children() {
		setEagerMask(c, on)
	}
}
