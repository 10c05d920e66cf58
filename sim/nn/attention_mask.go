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
	return (a.Causal || a.WindowBidir) && a.Window > 0 && a.Window <= seq && a.Impl == "sdpa"
}

// bidirMasked reports whether a bidirectional window's eager layer adds a
// mask at seq tokens (WindowBidir: the same threshold as SDPA's).
func (a *Attention) bidirMasked(seq int64) bool {
	return a.WindowBidir && a.Window > 0 && a.Window <= seq
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
		return a.forwardMask(b, s, dt, a.maskExpanded(b))
	case a.Causal || a.WindowBidir:
		return convertMask(b, a.forwardMask(b, s, units.BOOL, a.maskExpanded(b)), s, dt)
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

// maskExpanded reports whether the mask the library makes for SDPA is one
// [1, 1, seq, seq] storage expanded over the batch: the batch carries no
// attention_mask (core.Plan.NoAttentionMask) and nothing else in the mask
// reads the sample. masking_utils.sdpa_mask (transformers 5.25.0) calls the
// mask function on the batch, head, query and key indices broadcast against
// each other and expands the result to the batch; the causal and
// sliding-window functions read only the query and key, but the padding
// mask (padding_mask_function), the chunked one (chunked_overlay's
// left_padding[batch_idx]) and the images' blocks (blockwise_overlay) read
// the sample too, so those masks are whole. Before 4.53 Mistral's
// _update_causal_mask (4.52.4 modeling_mistral.py lines 511, 593-595)
// expanded its mask likewise and cloned it only to add an
// attention_mask; without one its keys run to past_seen_tokens +
// sequence_length + 1, a [seq, seq + 1] storage in the model's dtype
// that SDPA keeps as it is. Measured on the CPU: TestCheckpointHoldsForwardOnceValues'
// and TestSlidingWindowMaskOnce's attention_mask=False rows.
func (a *Attention) maskExpanded(b *core.Builder) bool {
	return b.NoAttentionMask() && a.Chunk == 0 && !a.imageMasked(b) && !a.noCacheMasked(b)
}

// noCacheMasked reports whether the library hands this causal SDPA layer
// a mask because the forward has neither a cache (use_cache off, as
// gradient checkpointing forces it: core.Builder.UseCache) nor an
// attention_mask (core.Plan.NoAttentionMask). transformers 4.54.0 to
// 4.57.x (NoCacheMask) then look for packed sequences in the position_ids
// (masking_utils._preprocess_mask_arguments, 4.57.1 line 735: "only if
// the 2D attention mask is explicitly None, and we don't have
// past_key_values"), and find_packed_sequence_indices returns its tensor
// even when nothing is packed (line 659: returning None "causes issues
// with export"); create_causal_mask then turns allow_is_causal_skip off
// (lines 820-822) and sdpa_mask builds a [batch, 1, seq, seq] bool mask
// whose function reads the sample, whole over the batch, which SDPA
// converts to its additive bias in every layer (convertMask);
// use_gqa_in_sdpa, which needs no mask, leaves repeat_kv's copies of k and
// v. The 4.53.0 wheel has no packed-sequence check; from 5.0.0
// find_packed_sequence_indices returns None when nothing is packed. A
// collator's attention_mask of ones skips the check, and the mask with it
// (_ignore_causal_mask_sdpa), and so does a torch before 2.6
// (core.Runtime.PackedSequenceMask). Measured on the CPU under 4.57.1 and
// 5.25.0: tools/oracle/sdpa_mask_probe.py, TestNoCacheMaskAsTransformers.
//
// A packed row (core/packing.go) is the case the check is for: 5.x
// (PackedMask) then make the block-diagonal mask too, whatever the torch.
func (a *Attention) noCacheMasked(b *core.Builder) bool {
	if !a.Causal || a.Impl != "sdpa" || b.UseCache() || !b.NoAttentionMask() {
		return false
	}
	return (a.NoCacheMask && b.Rt.PackedSequenceMask) || (a.PackedMask && b.Packed())
}

// forwardMask is the mask the library makes once a forward for the
// layers of this attention's kind (its window or chunk), [batch, 1, seq,
// seq] in dt, or with expanded one [1, 1, seq, seq] storage viewed over
// the batch, handed to every layer: the first masked layer of this
// lowering makes it and the later ones read it, so it lives until the
// last one done with it (transformers keeps it in the base model's
// forward until its layers are done; a checkpointed layer's recompute
// reads it again, an input of its region: core.OutsideRegions).
func (a *Attention) forwardMask(b *core.Builder, s []int64, dt units.DType, expanded bool) core.Value {
	seq := s[len(s)-2]
	batch := core.Rows(s) / seq
	shape := []int64{batch, 1, seq, seq}
	if expanded {
		shape[0] = 1
		if a.SharedMask {
			shape[3] = seq + 1 // _update_causal_mask's keys without an attention_mask (maskExpanded)
		}
	}
	key := fmt.Sprintf("attention_mask.%s.%v.window%d.chunk%d", dt.Name(), shape, a.Window, a.Chunk)
	if v, ok := b.SharedValue(key); ok {
		return v
	}
	i := b.AddOp("mask", "attention_mask", nil)
	y := b.Out(i, "attention_mask", shape, dt, "the attention mask made once a forward and handed to every layer (masking_utils; before 4.53 _update_causal_mask's additive one)")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Share(key, y)
	b.OutsideRegions(i) // made before the layers, outside their checkpoints
	return y
}

// convertMask is SDPA's additive bias for a boolean mask, [batch, 1,
// seq, seq] in dt for the layer's input of shape s (convert_boolean_attn_mask:
// a new tensor each call, whole even where the mask is expanded over the
// batch: its pointwise ops allocate the broadcast shape; torch 2.15 on the
// CPU saves a (4, 1, 64, 64) bf16 bias of 32,768 B for a (1, 1, 64, 64)
// bool mask expanded to batch 4), which the memory-efficient kernel keeps
// for backward.
func convertMask(b *core.Builder, mask core.Value, s []int64, dt units.DType) core.Value {
	seq := s[len(s)-2]
	i := b.AddOp("where", "attn_bias", []core.Value{mask})
	y := b.Out(i, "attn_bias", []int64{core.Rows(s) / seq, 1, seq, seq}, dt, "the mask as SDPA's additive bias (convert_boolean_attn_mask; saved by the efficient kernel)")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Op(i).Bytes += float64(b.Val(mask).Bytes)
	return y
}
