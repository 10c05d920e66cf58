package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// windowMasked reports whether a sliding window gets a mask at seq
// tokens: torch's SDPA has no window, so a window the sequence reaches is
// an explicit mask (transformers' sliding_window_causal_mask; its
// _ignore_causal_mask_sdpa keeps the mask once kv_length >= the window),
// which SDPA keeps as an additive bias, as the chunked mask (a vision
// tower's non-causal windows run one SDPA call per window instead); its kernel
// then computes every block (Gemma 4: TestGemma4SlidingMaskSDPA; Mistral,
// Phi-3: TestSlidingWindowMask).
func (a *Attention) windowMasked(seq int64) bool {
	return a.Causal && a.Window > 0 && a.Window <= seq && a.Impl == "sdpa"
}

// sdpaBias is the additive bias SDPA's kernel keeps for a layer given a
// mask (chunkMask): the layer's own (chunkBias: transformers from 4.53
// builds a boolean mask, which SDPA converts at each call), or with
// SharedMask the one tensor the library made for the forward, which the
// first masked layer of this lowering makes and the later ones read (one
// storage however many layers keep it). Before 4.53 Mistral's
// _update_causal_mask (and the copies of it in Mixtral, Phi-3 and
// Phi-3.5-MoE) built that mask in the activations' dtype, [batch, 1, seq,
// seq] given an attention_mask (causal_mask.clone()), and SDPA took it as
// it was (TestSlidingWindowMaskOnce).
func (a *Attention) sdpaBias(b *core.Builder, s []int64, dt units.DType) core.Value {
	if !a.SharedMask {
		return chunkBias(b, s, dt)
	}
	key := fmt.Sprintf("attention_mask.window%d.chunk%d", a.Window, a.Chunk)
	if v, ok := b.SharedValue(key); ok && b.Dtype(v) == dt {
		return v
	}
	seq := s[len(s)-2]
	batch := core.Rows(s) / seq
	i := b.AddOp("mask", "causal_mask", nil)
	y := b.Out(i, "causal_mask", []int64{batch, 1, seq, seq}, dt, "the additive mask made once a forward and handed to every layer (transformers before 4.53: _update_causal_mask)")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Share(key, y)
	return y
}
