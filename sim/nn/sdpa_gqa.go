package nn

import "github.com/memsh/memsh/sim/core"

// sdpaGQA reports whether SDPA reads the kv heads as they are
// (enable_gqa=True) rather than repeat_kv's copies: transformers >= 4.54
// (integrations/sdpa_attention.py, use_gqa_in_sdpa) passes it when torch
// has it (2.5 and later: Runtime.SDPAEnableGQA) and no attention mask is
// passed, true of causal attention without padding, sinks, or a sliding
// window or a chunk the sequence reaches, nor 4.54-4.57's forward with
// neither a cache nor an attention_mask (those build a mask: chunkMask,
// noCacheMasked). A head_dim over 256 keeps repeat_kv, as transformers 5
// does: torch has no fused kernel taking GQA there, and
// 4.54-4.57's enable_gqa would run the math kernel, which memsh does not
// model. The kernel then saves k and v with their kv heads and, like
// flash-attn's, computes dk and dv for every head in its backward before
// summing them.
func (a *Attention) sdpaGQA(b *core.Builder) bool {
	return a.EnableGQA && a.Impl == "sdpa" && a.Kv() != a.Heads && (!a.FusedQKV || a.RepeatKV) && b.Rt.SDPAEnableGQA &&
		a.Causal && !a.MaskAdd && !a.Sinks && !a.chunkMask && a.Hd() <= 256
}
