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
// document BlockMask (torchtitan's block_causal; nn/flex_attention.go);
// SDPA and eager attention need an N x N block-diagonal mask, which
// transformers 4.54 and later make from the position_ids (below), so
// hf_config's models of those releases run them; other SDPA and eager
// layers are refused. Memory then scales with N real tokens and no
// padding. The time model costs the attention core as
// one causal row of N tokens, an upper bound of the per-document cost,
// unless doc_tokens says how long the documents are (below).

// Documents: train(..., doc_tokens=L) says the packed documents are L
// tokens long on average, and that attention stays within each one, as
// torchtitan's block_causal mask (FlexAttention) and flash-attn's varlen
// kernel keep it. The time model then costs the attention core per
// document (nn/flex_blocks.go) instead of one causal row; unset, one
// causal row, the upper bound (the default: no published figure of a
// dataset's document length in a given tokenizer is built in).

// Documents' lengths: train(..., doc_tokens=[l1, l2, ...]) gives the
// packed row's documents one by one (Plan.Docs; tokens_per_batch is their
// sum), as transformers' DataCollatorWithFlattening and TRL's
// padding_free lay a micro-batch out: input_ids [1, sum], position_ids
// restarting at 0 for each document, no attention_mask. What each
// attention kernel then does, as transformers 5.25.0 runs it:
//   - flash (flash_attention_2/3): _flash_attention_forward finds the row
//     packed from position_ids (_is_packed_sequence) and runs
//     flash_attn_varlen_func on cu_seqlens made from them
//     (modeling_flash_attention_utils.py l. 484-559, 855-861): each
//     document attends to itself, sum of l_i (l_i + 1) / 2 scores, no mask;
//   - sdpa and eager: masking_utils finds the row packed
//     (find_packed_sequence_indices, l. 735-764; only with no
//     attention_mask and no cache, l. 865-870) and ANDs a per-document
//     function into the causal mask (l. 1001-1002): one [1, 1, sum, sum]
//     block-diagonal mask, bool for SDPA (its efficient kernel computes
//     every block and keeps the additive bias; repeat_kv's copies, no
//     enable_gqa with a mask), float for eager: nn.Attention.PackedMask.
//     4.54 to 4.57 make it through their packed-sequence check
//     (nn.Attention.NoCacheMask, torch 2.6 on), 4.53 and older have none:
//     one causal row over every document (what runs, memory and time).

// DocTokens is the plan's mean tokens a document (Plan.DocTokens), 0 when
// attention runs one causal row.
func (b *Builder) DocTokens() int64 {
	if b.Ft == nil {
		return 0
	}
	return b.Ft.docTokens
}

// Docs are the packed row's documents' lengths (Plan.Docs), nil when
// they are not given one by one.
func (b *Builder) Docs() []int64 {
	if b.Ft == nil {
		return nil
	}
	return b.Ft.docs
}

// ForwardCache reports whether the plan's forward fills transformers'
// DynamicCache (Plan.UseCache, which checkpointing turns off).
func (p *Plan) ForwardCache() bool {
	return p.UseCache && (p.Checkpoint.Mode == "" || p.Checkpoint.Mode == "none")
}

// Packed reports whether the plan lowers one packed row
// (Plan.TokensPerBatch).
func (b *Builder) Packed() bool { return b.Ft != nil && b.Ft.packed }

// validatePacking checks that every attention of a packed plan, or of one
// with documents, runs flash or flex.
func (p *Plan) validatePacking() error {
	if p.DocTokens < 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("doc_tokens must be positive, or None for one causal row (got %d)", p.DocTokens)}
	}
	if len(p.Docs) > 0 {
		var sum int64
		for _, l := range p.Docs {
			if l <= 0 {
				return &units.Error{Path: "train", Msg: fmt.Sprintf("doc_tokens: every document's length must be positive (got %d)", l)}
			}
			sum += l
		}
		if sum != p.TokensPerBatch {
			return &units.Error{Path: "train", Msg: fmt.Sprintf("doc_tokens: the documents' lengths sum to %d tokens, the packed row holds tokens_per_batch=%d", sum, p.TokensPerBatch),
				Hint: "leave tokens_per_batch out (a list of lengths packs them into one row of their sum) or make them agree"}
		}
	}
	if p.TokensPerBatch <= 0 && p.DocTokens == 0 {
		return nil
	}
	pk := Packing{Row: p.TokensPerBatch > 0, ForwardCache: p.ForwardCache(), PackedSequenceMask: p.Runtime.PackedSequenceMask, Runtime: p.Runtime.Name}
	var bad string
	for _, l := range p.Model.Layers {
		Walk(l, ChildPath("", nil, l), func(path string, x Layer) {
			if c, ok := x.(PackingChecker); ok && bad == "" {
				if err := c.CheckPacking(path, pk); err != nil {
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
			Hint: `build the model with attn="flash" or "flex" (or attention(..., impl="flash")), read it with hf_config at transformers 4.54 or later (whose SDPA and eager layers get the block-diagonal mask), or pad with seq= instead`}
	}
	return nil
}
