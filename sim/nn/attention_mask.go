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
// mask (chunkMask): the layer's own (convertMask: transformers from 4.53
// builds a boolean mask once a forward, which SDPA converts at each
// call), or with
// SharedMask the one tensor the library made for the forward, which the
// first masked layer of this lowering makes and the later ones read (one
// storage however many layers keep it). Before 4.53 Mistral's
// _update_causal_mask (and the copies of it in Mixtral, Phi-3 and
// Phi-3.5-MoE) built that mask in the activations' dtype, [batch, 1, seq,
// seq] given an attention_mask (causal_mask.clone()), and SDPA took it as
// it was (TestSlidingWindowMaskOnce).
func (a *Attention) sdpaBias(b *core.Builder, s []int64, dt units.DType) core.Value {
	switch {
	case a.bias != nil:
		return a.bias(b)
	case a.SharedMask:
		return a.forwardMask(b, s, dt)
	case a.Causal:
		return convertMask(b, a.forwardMask(b, s, units.BOOL), dt)
	}
	// a vision tower's padding mask: the tower makes it (and keeps it)
	seq := s[len(s)-2]
	shape := []int64{core.Rows(s) / seq, 1, seq, seq}
	i := b.AddOp("where", "attn_bias", nil)
	y := b.Out(i, "attn_bias", shape, dt, "the mask as SDPA's additive bias (convert_boolean_attn_mask; saved by the efficient kernel)")
	b.Val(y).Grad = false
	b.Op(i).Bytes += float64(units.BOOL.Bytes(core.Numel(shape)))
	return y
}

// forwardMask is the mask the library makes once a forward for the
// layers of this attention's kind (its window or chunk), [batch, 1, seq,
// seq] in dt, handed to every layer: the first masked layer of this
// lowering makes it and the later ones read it, so it lives until the
// last one done with it (transformers keeps it in the base model's
// forward until its layers are done; a checkpointed layer's recompute
// reads it again, an input of its region: core.OutsideRegions).
func (a *Attention) forwardMask(b *core.Builder, s []int64, dt units.DType) core.Value {
	seq := s[len(s)-2]
	batch := core.Rows(s) / seq
	key := fmt.Sprintf("attention_mask.%s.%dx%d.window%d.chunk%d", dt.Name(), batch, seq, a.Window, a.Chunk)
	if v, ok := b.SharedValue(key); ok {
		return v
	}
	i := b.AddOp("mask", "attention_mask", nil)
	y := b.Out(i, "attention_mask", []int64{batch, 1, seq, seq}, dt, "the attention mask made once a forward and handed to every layer (masking_utils; before 4.53 _update_causal_mask's additive one)")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Share(key, y)
	b.OutsideRegions(i) // made before the layers, outside their checkpoints
	return y
}

// convertMask is SDPA's additive bias for a boolean mask, [batch, 1,
// seq, seq] in dt (convert_boolean_attn_mask: a new tensor each call),
// which the memory-efficient kernel keeps for backward.
func convertMask(b *core.Builder, mask core.Value, dt units.DType) core.Value {
	i := b.AddOp("where", "attn_bias", []core.Value{mask})
	y := b.Out(i, "attn_bias", b.Shape(mask), dt, "the mask as SDPA's additive bias (convert_boolean_attn_mask; saved by the efficient kernel)")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Op(i).Bytes += float64(b.Val(mask).Bytes)
	return y
}
