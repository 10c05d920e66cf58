package core

import (
	"github.com/memsh/memsh/sim/units"
)

// Sequence packing: train(..., seq=S) is the padded length (every
// sequence of the micro-batch padded to S tokens); train(...,
// tokens_per_batch=N) packs whole documents back to back into one row of
// N tokens, as TRL's packing=True with padding_free and torchtune's
// PackedDataset do. Attention must then stay within each document:
// flash-attn's varlen kernel (cu_seqlens, a few int32 per document) does
// that at no memory cost, and so does compiled FlexAttention with a
// document BlockMask (torchtitan's block_causal; nn/flex_attention.go); SDPA and eager attention would need an N x N
// block-diagonal mask per head and are refused. Memory then scales with N
// real tokens and no padding. The time model still costs the attention
// core as one causal row of N tokens, an upper bound of the per-document
// cost.

// validatePacking checks that every attention of a packed plan runs flash
// or flex.
func (p *Plan) validatePacking() error {
	if p.TokensPerBatch <= 0 {
		return nil
	}
	var bad string
	for _, l := range p.Model.Layers {
		Walk(l, ChildPath("", nil, l), func(path string, x Layer) {
			if c, ok := x.(PackingChecker); ok && bad == "" {
				if err := c.CheckPacking(path); err != nil {
					bad = err.Error()
				}
			}
		})
	}
	if bad != "" {
		return &units.Error{Path: "train", Msg: "tokens_per_batch packs documents into one row, which needs flash attention's varlen kernel (or FlexAttention's document mask): " + bad,
			Hint: `build the model with attn="flash" or "flex" (or attention(..., impl="flash")), or pad with seq= instead`}
	}
	return nil
}
