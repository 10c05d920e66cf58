package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The two ways transformers runs the gated delta rule in training.
//
// flash-linear-attention's chunk_gated_delta_rule (ChunkGatedDeltaRuleFunction
// in fla/ops/gated_delta_rule/chunk.py, fla-core 0.6.0) saves, with
// use_qk_l2norm_in_kernel as transformers calls it: the l2-normed q and k
// and their fp32 rstd (l2norm_fwd), v (input_guard's contiguous copy of
// the conv output's strided view), beta, the chunk-local cumsum of g
// (fp32) and A, the WY representation's inverse [tokens, value heads,
// chunk] in k's dtype (chunk_gated_delta_rule_fwd_intra). It keeps no
// chunk state: chunk_gated_delta_rule_bwd recomputes w, u and the states
// h (recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h) and holds their
// gradients dh beside them.
//
// transformers' torch_chunk_gated_delta_rule (modeling_qwen3_next.py at
// 5.17.0) runs in fp32 on the sequence padded to whole chunks and keeps,
// per value head: the fp32 q and k with their l2norm rsqrt; the padded
// q (scaled), k, v and beta; five [chunk, chunk] matrices a chunk
// (exp of the pairwise decays, k_beta k^T, the UT system, q k^T and the
// intra-chunk attention); k_beta; three exponentials of the cumulative
// decay and the chunk decays; solve_triangular's two outputs (the new
// values and k_cumdecay); the decayed q and k; and, from the Python loop
// over chunks, every chunk's [key_dim, value_dim] state and its v_new.
// Measured on the CPU with saved_tensors_hooks (torch 2.15.0,
// transformers 5.17.0; sim/gated_deltanet_test.go has the figures).

// flaChunk lowers fla's chunk_gated_delta_rule.
func (g *GatedDeltaNet) flaChunk(b *core.Builder, q, k, conv, beta, gate core.Value, s []int64) core.Value {
	i := b.AddOp("gated_delta_rule", "chunk_gated_delta_rule", []core.Value{q, k, conv, beta, gate})
	dt := b.Dtype(conv)
	T := core.Rows(s)
	hv, dk, dv := g.VHeads, g.KHeadDim, g.VHeadDim
	o := b.Out(i, "core_attn_out", core.WithLast(s, hv*dv), dt, "the delta rule's output")
	per := core.WithLast(s, hv)
	saved := savedOuts(b, i, []savedSpec{
		{"q_l2norm", core.WithLast(s, hv*dk), dt, "l2-normed q (saved)"},
		{"k_l2norm", core.WithLast(s, hv*dk), dt, "l2-normed k (saved)"},
		{"q_rstd", per, units.FP32, "q's l2norm rstd (saved)"},
		{"k_rstd", per, units.FP32, "k's l2norm rstd (saved)"},
		{"v", core.WithLast(s, hv*dv), dt, "input_guard's contiguous copy of v (saved)"},
		{"g_cumsum", per, units.FP32, "the chunk-local cumsum of g (saved)"},
		{"A", core.WithLast(s, hv*g.Chunk), dt, "the WY representation's inverse per chunk (saved)"},
	})
	b.Save(i, append(saved, beta)...)
	chunks := (T + g.Chunk - 1) / g.Chunk
	// Forward transients: w [T, hv, dk], u and v_new [T, hv, dv], the
	// chunk states h [chunks, hv, dk, dv] (k's dtype).
	h := dt.Bytes(chunks * hv * dk * dv)
	work := dt.Bytes(T*hv*dk) + 2*dt.Bytes(T*hv*dv) + h
	b.Op(i).WorkF = work
	// Backward recomputes them and holds dh (as h) and dv2 beside them.
	b.Op(i).WorkB = work + h + dt.Bytes(T*hv*dv)
	b.Op(i).Flops = g.chunkFLOPs(T)
	b.Op(i).Bytes += float64(b.Val(conv).Bytes) + float64(b.Val(o).Bytes) + float64(h)
	return o
}

// chunkFLOPs counts the chunked delta rule's matmuls per token and value
// head: k k^T and q k^T within the chunk (chunk x dk each), the WY
// products w = A k and u = A v (chunk x (dk + dv)), the intra-chunk
// attention times v_new (chunk x dv), and the state's three products
// (w h, q h and k^T v_new: 3 dk x dv).
func (g *GatedDeltaNet) chunkFLOPs(T int64) float64 {
	c, dk, dv := float64(g.Chunk), float64(g.KHeadDim), float64(g.VHeadDim)
	return 2 * float64(T*g.VHeads) * (c*(3*dk+2*dv) + 3*dk*dv)
}

// torchChunk lowers transformers' torch_chunk_gated_delta_rule.
func (g *GatedDeltaNet) torchChunk(b *core.Builder, q, k, conv, beta, gate core.Value, s []int64) core.Value {
	i := b.AddOp("gated_delta_rule", "torch_chunk_gated_delta_rule", []core.Value{q, k, conv, beta, gate})
	dt := b.Dtype(conv)
	seq := s[len(s)-2]
	batch := core.Rows(s) / max(seq, 1)
	c := g.Chunk
	padded := (seq + c - 1) / c * c
	chunks := padded / c
	hv, dk, dv := g.VHeads, g.KHeadDim, g.VHeadDim
	o := b.Out(i, "core_attn_out", core.WithLast(s, hv*dv), dt, "the delta rule's output, cast back")
	// [batch, heads, positions, width] fp32 tensors.
	f32 := func(positions, width int64) []int64 { return []int64{batch, hv, positions, width} }
	type sv = fp32Saved
	decays, carried := int64(3), []sv{
		{"chunk_decay", f32(chunks, 1), 1}, // exp of each chunk's total decay
		{"new_values", f32(padded, dv), 1}, // solve_triangular's outputs
		{"k_cumdecay", f32(padded, dk), 1},
		{"qk_decayed", f32(padded, dk), 2}, // q and k times their decays
	}
	if chunks == 1 {
		// One chunk: the state q and k_cumdecay multiply is the zero
		// initial state (no grad), so the decayed q is not saved, and
		// the one state update (k decayed, chunk_decay and their exp)
		// feeds no output (output_final_state is False without a cache):
		// kept are new_values and k_cumdecay, solve_triangular's outputs
		// (hf_block_saved.py on olmo_hybrid-tiny.json, 32 tokens,
		// transformers 5.25.0).
		decays, carried = 2, carried[1:3]
	}
	saved := fp32SavedOuts(b, i, "torch_chunk_gated_delta_rule", append([]sv{
		{"qk_fp32", f32(seq, dk), 2},          // l2norm's fp32 inputs
		{"qk_rsqrt", f32(seq, 1), 2},          // l2norm's rsqrt
		{"v_padded", f32(padded, dv), 1},      // saved by v * beta
		{"qk_padded", f32(padded, dk), 2},     // the scaled q, k
		{"beta_padded", f32(padded, 1), 1},    // saved by v * beta and k * beta
		{"chunk_matrices", f32(padded, c), 5}, // exp(pairwise decay), k_beta k^T, UT system, q k^T, intra-chunk attention
		{"k_beta", f32(padded, dk), 1},
		{"decay_exp", f32(padded, 1), decays}, // exp of the cumulative decays
	}, append(carried,
		sv{"states", f32(chunks*dk, dv), 1}, // every chunk's recurrent state (the loop's matmuls)
		sv{"v_new", f32(padded, dv), 1},     // every chunk's v_new
	)...))
	mask := b.Out(i, "upper_mask", []int64{c, c}, units.BOOL, "the strictly upper triangular chunk mask, saved by masked_fill")
	b.Val(mask).Grad = false
	b.Save(i, append(saved, mask)...)
	// Forward transients: the fp32 v, v_beta, the decayed k_beta and the
	// fp32 output (core_attn_out = zeros_like(new_values)).
	b.Op(i).WorkF = units.FP32.Bytes(batch*hv*seq*dv) + units.FP32.Bytes(batch*hv*padded*(2*dv+dk))
	b.Op(i).Flops = g.chunkFLOPs(batch * padded)
	b.Op(i).Bytes += float64(b.Val(conv).Bytes) + float64(b.Val(o).Bytes)
	return o
}

// savedSpec is a tensor a kernel makes and keeps for its backward alone.
type savedSpec struct {
	name  string
	shape []int64
	dt    units.DType
	why   string
}

// savedOuts adds specs, in order, as outputs of op i that need no
// gradient (the caller saves them).
func savedOuts(b *core.Builder, i int32, specs []savedSpec) []core.Value {
	out := make([]core.Value, 0, len(specs))
	for _, v := range specs {
		x := b.Out(i, v.name, v.shape, v.dt, v.why)
		b.Val(x).Grad = false
		out = append(out, x)
	}
	return out
}

// fp32Saved is n fp32 tensors of one shape a torch kernel keeps for
// backward (one tensor of n x shape).
type fp32Saved struct {
	name  string
	shape []int64
	n     int64
}

// fp32SavedOuts adds specs as savedOuts does, each named after kernel;
// a spec of no elements (a count of chunks that is zero) adds nothing.
func fp32SavedOuts(b *core.Builder, i int32, kernel string, specs []fp32Saved) []core.Value {
	var out []savedSpec
	for _, v := range specs {
		if core.Numel(v.shape) == 0 {
			continue
		}
		shape := v.shape
		if v.n > 1 {
			shape = append([]int64{v.n}, shape...)
		}
		out = append(out, savedSpec{v.name, shape, units.FP32, kernel + ": " + v.name + " (saved)"})
	}
	return savedOuts(b, i, out)
}
