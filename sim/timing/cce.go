package timing

import "github.com/memsh/memsh/sim/core"

// cce prices Cut Cross-Entropy's kernels (core.CCEOp, sim/core/cce.go):
// the forward's log-sum-exp kernel runs the logits' GEMM (tokens x
// vocabulary x hidden) block by block without writing them; the backward
// kernel recomputes it and, from the softmax it never stores, runs the
// input's gradient GEMM and, when lm_head trains, the weight's, in the
// same kernel. The GEMMs are priced at the device's GEMM rate in the
// inputs' dtype, and the backward dense: its gradient filtering skips
// the vocabulary blocks whose softmax stays below filter_eps, which
// depends on the trained model's outputs (an upper bound, core/cce.go).
func (pr *pricer) cce(op *core.OpInfo) OpCost {
	if len(op.In) < 2 || op.Flops <= 0 {
		return pr.stream(op, op.Bytes)
	}
	x := &pr.prog.Values[op.In[0]]
	d := float64(x.Shape[len(x.Shape)-1])
	vd := op.Flops / 2 // tokens x vocabulary x hidden
	tokens, vocab := 0.0, 0.0
	if len(op.Params) > 0 {
		w := &pr.prog.Params[op.Params[0]]
		vocab = float64(w.Shape[0])
	}
	if vocab <= 0 || d <= 0 {
		return pr.stream(op, op.Bytes)
	}
	tokens = vd / (vocab * d)
	in := elemBytes(x.Dtype)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: (tokens*d + vocab*d) * in}
	c.Fwd, c.Bound = gemmTime(&pr.d, x.Dtype, 1, tokens, vocab, d, in, 0)
	input, weight := pr.needsGrad(op)
	if input || weight {
		recompute, _ := gemmTime(&pr.d, x.Dtype, 1, tokens, vocab, d, in, 0)
		c.Bwd, c.BwdK = recompute, 1
		if input { // de = softmax' c: tokens x hidden over the vocabulary
			t, _ := gemmTime(&pr.d, x.Dtype, 1, tokens, d, vocab, in, in)
			c.Bwd += t
			c.Dgrad = t
		}
		if weight { // dc = softmax'^T e: vocabulary x hidden over the tokens
			t, _ := gemmTime(&pr.d, x.Dtype, 1, vocab, d, tokens, in, in)
			c.Bwd += t
			c.Wgrad = t
		}
	}
	return c
}
