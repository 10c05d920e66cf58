package core

import (
	"fmt"

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
// real tokens and no padding. The time model costs the attention core as
// one causal row of N tokens, an upper bound of the per-document cost,
// unless doc_tokens says how long the documents are (below).

// Documents: train(..., doc_tokens=L) says the packed documents are L
// tokens long on average, and that attention stays within each one, as
// torchtitan's block_causal mask (FlexAttention) and flash-attn's varlen
// kernel keep it. The time model then costs the attention core per
// document (nn/flex_blocks.go) instead of one causal row; unset, one
// causal row, the upper bound (the default: no published figure of a
// dataset's document length in a given tokenizer is built in).

// DocTokens is the plan's mean tokens a document (Plan.DocTokens), 0 when
// attention runs one causal row.
func (b *Builder) DocTokens() int64 {
	if b.Ft == nil {
		return 0
	}
	return b.Ft.docTokens
}

// validatePacking checks that every attention of a packed plan, or of one
// with documents, runs flash or flex.
func (p *Plan) validatePacking() error {
	if p.DocTokens < 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("doc_tokens must be positive, or None for one causal row (got %d)", p.DocTokens)}
	}
	if p.TokensPerBatch <= 0 && p.DocTokens == 0 {
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
	if bad != "" && p.TokensPerBatch <= 0 {
		return &units.Error{Path: "train", Msg: "doc_tokens masks attention per document, which needs flash attention's varlen kernel or FlexAttention's document mask: " + bad,
			Hint: `build the model with attn="flash" or "flex", or leave doc_tokens out (one causal row)`}
	}
	if bad != "" {
		return &units.Error{Path: "train", Msg: "tokens_per_batch packs documents into one row, which needs flash attention's varlen kernel (or FlexAttention's document mask): " + bad,
			Hint: `build the model with attn="flash" or "flex" (or attention(..., impl="flash")), or pad with seq= instead`}
	}
	return nil
}
