package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// transformers' chunk_kimi_delta_attention (modeling_kimi_linear.py at
// 5.25.0), the torch path it runs without flash-linear-attention, works
// in fp32 on q, k, v, beta and g made contiguous head major, the
// sequence padded to whole chunks (F.pad), and keeps for backward:
//
//   - q and k in fp32 (l2norm's input; a contiguous copy in fp32, the
//     .to(float32) copy in bf16) and their norms (sqrt's output);
//   - the padded beta (saved by v * beta and k * beta), v and k, k_beta,
//     v_beta, the scaled q;
//   - the pairwise decay exp(g_i - g_j) per chunk and channel, [chunk,
//     chunk, head_dim] a chunk and head, and the product k_beta_i * k_j
//     it multiplies (both saved by the elementwise product whose sum over
//     the channels is the UT system): the layer's largest tensors;
//   - the UT system's row loop (for i in range(1, chunk): row and block
//     cloned, their product saving both): (c - 1) c (c + 1) / 3 values a
//     chunk and head;
//   - the system's inverse (attn), exp(g), k_beta * exp(g) (both read by
//     k_cumdecay's matmul) and three boolean [chunk, chunk] masks;
//   - from the Python loop over chunks, each chunk's exp(g_i), q_i * k_j
//     per channel (the intra-chunk scores' product), v_new and the
//     intra-chunk attention; the zero initial state; each state after the
//     first and the decayed q that reads it, and k_cumdecay (read with a
//     state that needs a gradient: from two chunks on); each chunk's state
//     update but the last's (the last state feeds nothing without a
//     cache): the chunk's total decay, the decayed k and its exp.
//
// Measured on the CPU with saved_tensors_hooks (hf_block_saved.py, torch
// 2.15.0, transformers 5.25.0, one and two chunks: sim/kimi_linear_test.go
// has the figures).

// torchChunk lowers chunk_kimi_delta_attention.
func (a *KimiDeltaAttention) torchChunk(b *core.Builder, conv, g, beta core.Value, s []int64) core.Value {
	i := b.AddOp("gated_delta_rule", "chunk_kimi_delta_attention", []core.Value{conv, g, beta})
	dt := b.Dtype(conv)
	seq := s[len(s)-2]
	batch := core.Rows(s) / max(seq, 1)
	c, d, h := a.Chunk, a.HeadDim, a.Heads
	padded := (seq + c - 1) / c * c
	chunks := padded / c
	o := b.Out(i, "core_attn_out", core.WithLast(s, h*d), dt, "the delta rule's output, cast back")
	// [batch, heads, positions, width] fp32 tensors.
	f32 := func(positions, width int64) []int64 { return []int64{batch, h, positions, width} }
	type sv = fp32Saved
	saved := []sv{
		{"qk_fp32", f32(seq, d), 2},
		{"qk_norm", f32(seq, 1), 2},
		{"beta_padded", f32(padded, 1), 1},
		{"vk_padded", f32(padded, d), 2},
		{"k_beta", f32(padded, d), 1},
		{"v_beta", f32(padded, d), 1},
		{"q_scaled", f32(padded, d), 1},
		{"pair_decay", f32(padded, c*d), 1}, // exp(g_i - g_j) per channel
		{"k_beta_k", f32(padded, c*d), 1},   // k_beta_i * k_j per channel
		{"ut_rows", f32(chunks, (c-1)*c*(c+1)/3), 1},
		{"attn", f32(padded, c), 1},
		{"g_exp", f32(padded, d), 1},
		{"k_beta_g_exp", f32(padded, d), 1},
		{"state0", f32(d, d), 1},
		{"chunk_g_exp", f32(padded, d), 1},     // exp(g_i), each chunk
		{"q_k", f32(padded, c*d), 1},           // q_i * k_j per channel, each chunk
		{"v_new", f32(padded, d), 1},           // each chunk
		{"attn_intra", f32(padded, c), 1},      // each chunk
		{"states", f32((chunks-1)*d, d), 1},    // the states after the first chunk
		{"q_decayed", f32((chunks-1)*c, d), 1}, // q_i * exp(g_i), read with them
		{"state_decay", f32(chunks-1, d), 1},   // exp of each chunk's total decay, the last's but
		{"k_decay", f32((chunks-1)*c, d), 2},   // exp(g_last - g_i) and k times it, the last's but
	}
	if chunks > 1 {
		saved = append(saved, sv{"k_cumdecay", f32(padded, d), 1})
	}
	vals := fp32SavedOuts(b, i, "chunk_kimi_delta_attention", saved)
	masks := b.Out(i, "chunk_masks", []int64{3, c, c}, units.BOOL, "the three triangular [chunk, chunk] masks masked_fill saves")
	b.Val(masks).Grad = false
	b.Save(i, append(vals, masks)...)
	// Forward transients: the pairwise decay before exp and its masked
	// copy, and the product k_beta_i * k_j * decay the sum reduces, each
	// [chunk, chunk, head_dim] a chunk and head, one beside the next;
	// backward, their gradients likewise.
	pair := units.FP32.Bytes(batch * h * padded * c * d)
	b.Op(i).WorkF = 2 * pair
	b.Op(i).WorkB = 2 * pair
	b.Op(i).Flops = a.chunkFLOPs(batch * padded)
	b.Op(i).Bytes += float64(b.Val(conv).Bytes) + float64(b.Val(o).Bytes) + float64(pair)
	return o
}

// chunkFLOPs counts the kernel's matmuls per token and head: the WY
// products attn v_beta and attn (k_beta exp(g)) and the intra-chunk
// attention times v_new (chunk x head_dim each), and the state's three
// products (q exp(g) S, k_cumdecay S and the update k^T v_new: head_dim
// x head_dim each). The per-channel [chunk, chunk, head_dim] products it
// sums are elementwise work, priced by their bytes (the op's Bytes).
func (a *KimiDeltaAttention) chunkFLOPs(T int64) float64 {
	c, d := float64(a.Chunk), float64(a.HeadDim)
	return 2 * float64(T*a.Heads) * (3*c*d + 3*d*d)
}
