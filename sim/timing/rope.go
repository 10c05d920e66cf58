package timing

import "github.com/memsh/memsh/sim/core"

// hfRope prices Hugging Face's rotary embedding (apply_rotary_pos_emb
// and rotate_half in modeling_llama.py and its copies, transformers
// 5.17.0) kernel by kernel on a GPU whose eager kernels were measured
// (hw.GraphKernels.Broadcast), in eager dispatch; ok is false elsewhere
// (the op keeps its bytes at the stream rate).
//
//	x1, x2 = x[..., :d/2], x[..., d/2:]
//	q_embed = (x * cos) + (torch.cat((-x2, x1), dim=-1) * sin)
//
// x is q or k transposed to [b, heads, s, d] (a strided view), cos and
// sin are [b, 1, s, d], broadcast over the heads. A binary op with a
// broadcast or strided operand runs TensorIterator's generic
// elementwise_kernel (the kernel hw.GraphKernels.Broadcast measured:
// 0.346 of the peak for 2-byte operands, 0.569 for fp32, 0.300 for a
// 2-byte input times an fp32 factor, autocast's fp32 cos and sin), and
// so does the negation of the strided half x2, and the add of x * cos
// (x's strides) to rot * sin (contiguous). The forward is five kernels:
// x * cos and rot * sin (X in, X out each, generic), -x2 (X/2 in and
// out, generic), the cat (X in, X out, stream) and the add (two outputs
// in, one out, generic). cos and sin, 1/heads of x and re-read
// for every head, are not counted. The backward (autograd's formulas,
// tools/autograd/derivatives.yaml): the add passes its gradient through;
// grad * sin and grad * cos (generic); the cat's gradient split into
// views, the negation's gradient (generic); each slice's gradient a
// zero-filled tensor of x's shape with the half copied in
// (slice_backward: two kernels, X and X/2 + X/2 bytes); and x's three
// gradients (the product with cos, the two slices) summed by two adds
// (InputBuffer::accumulate, three passes over X each; the second adds
// the strided gradient of x * cos, generic): nine kernels.
//
// One Qwen3-0.6B step on an H200 under torch.profiler (hf_profile.jsonl,
// run 19) ran 18 calls of the generic bf16 binary kernel per layer, four
// of them these products forward and backward, two cat kernels, and four
// generic adds (q's and k's forward add and one sum each), at 0.36 of
// the peak on average (9.8 ms over 112 calls; Llama-3.2-1B's 64: 0.34),
// the Broadcast rate.
func (pr *pricer) hfRope(op *core.OpInfo) (OpCost, bool) {
	g, ok := pr.graphRates()
	if !ok || pr.dispatch != DispatchEager || len(op.In) == 0 || len(op.Out) != 1 { // In[1:]: the cos and sin tables, if modelled (nn.ropeTables)
		return OpCost{}, false
	}
	p := pr.prog
	in, out := &p.Values[op.In[0]], &p.Values[op.Out[0]]
	mul := broadcastFrac(g, in.Dtype, out.Dtype)
	neg := broadcastFrac(g, in.Dtype, in.Dtype)
	back := broadcastFrac(g, out.Dtype, out.Dtype)
	if mul <= 0 || neg <= 0 || back <= 0 {
		return OpCost{}, false
	}
	peak, s := pr.peakBytes(), streamRate(&pr.d)
	xi, xo := float64(in.Bytes), float64(out.Bytes)
	generic := 2*(xi+xo)/mul + xi/neg + 3*xo/back
	streamed := 2 * xi
	c := OpCost{FwdK: 5, Flops: op.Flops, Bytes: 2*(xi+xo) + xi + 3*xo + streamed}
	c.Fwd, c.Bound = kernelTime(0, generic/peak+streamed/s)
	if in.Grad {
		bg := 2*(xo+xi)/back + xi/neg + 3*xi/neg // grad * sin, grad * cos (cast to x's dtype), -grad, the strided sum
		bs := 2*(xi+xi) + 3*xi                   // two slice_backward, the contiguous sum
		c.Bwd, _ = kernelTime(0, bg/peak+bs/s)
		c.BwdK = 9
		c.Bwd = max(c.Bwd, c.BwdK*kernelFloor)
	}
	return c, true
}
