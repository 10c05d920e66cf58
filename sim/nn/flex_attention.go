package nn

import "github.com/memsh/memsh/sim/units"

// Attention.Impl "flex" is torch.nn.attention.flex_attention compiled by
// torch.compile, as torchtitan's FlexAttention runs it
// (torchtitan/models/common/attention.py at b5bcd76c6: q, k and v of
// [tokens, heads, head_dim] handed over as [1, heads, tokens, head_dim]
// views, enable_gqa when there are fewer kv heads, a BlockMask of
// causal AND packed-document masks).
//
// What it keeps is flash-attn's set: measured with torch 2.15.0 on the
// CPU (tools/oracle/flex_saved.py, backend aot_eager_decomp_partition,
// the min-cut partitioner Inductor uses; TestFlexAttentionSaved), the
// compiled step saves q, k and v themselves (k and v with their kv
// heads: no expansion), the output in q's dtype with q's stride order
// (so the [tokens, heads*head_dim] view o_proj reads is no copy) and
// an fp32 logsumexp of [heads, tokens]; the max_scores the autograd
// function saves eagerly is not used by the backward and not kept.
//
// What it allocates besides is read from torch 2.15's Inductor lowering
// (torch/_inductor/kernel/flex/flex_attention.py), the CUDA path:
//   - forward: max_scores, fp32 [heads, tokens], an output of the
//     template freed after it (flex_attention, l.418);
//   - backward: delta = sum(out * grad_out), fp32 [heads, tokens]
//     (l.976-988); grad_query in q's dtype and grad_key, grad_value
//     with the kv heads (l.993-1015: the kernel loops over the
//     GQA_SHARED_HEADS of each kv head), which are the input gradients.
//     No fp32 dq accumulator and no expanded dk, dv as flash-attn 2's
//     backward has.
//
// Not replayed: the BlockMask, built once a step before the forward
// and read by every layer: eight int32 tensors (kv_num_blocks,
// kv_indices, their full_* and the q_* transposes of both), 4 x (n + n²)
// x 4 bytes for n = tokens/128 blocks (65 KiB at 8,192 tokens, 16 MiB at
// 131,072), and the mask's int32 document ids and offsets (8 bytes a
// token).
//
// Time: priced on the FlashAttention curves (timing/ops.go): no published
// figure of FlexAttention's kernel efficiency against flash-attn's is
// used here.

// kvNative reports whether the kernel reads the kv heads as they are
// (flash-attn, FlexAttention with enable_gqa) rather than repeat_kv's
// copies, and needs no dense mask for packed documents.
func (a *Attention) kvNative() bool { return a.Impl == "flash" || a.Impl == "flex" }

// flexWork is compiled FlexAttention's transient workspace in forward
// (max_scores) and backward (delta): fp32 [heads, tokens] each.
func flexWork(tokens, heads int64) (fwd, bwd int64) {
	n := units.FP32.Bytes(tokens * heads)
	return n, n
}
