package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// trlLogProb prices TRL's ChunkedLogProbFunction (core.TRLLogProbOp,
// sim/core/trl_fused_head.go): torch.mm writes each [tokens, 32768] tile
// of the logits to mm_buf in the compute dtype and a Triton kernel folds
// it into the running statistics, reading it once; the backward
// recomputes each tile (written, then read and rewritten in place as the
// logits' gradient by its fold kernel) and runs the input's and, when
// lm_head trains, the weight's gradient GEMMs on it, accumulating in fp32.
// The GEMMs are priced at the device's GEMM rate, the folds' passes over
// the tiles at its streaming rate.
func (pr *pricer) trlLogProb(op *core.OpInfo) OpCost {
	if len(op.In) < 1 || len(op.Params) < 1 || op.Flops <= 0 {
		return pr.stream(op, op.Bytes)
	}
	x := &pr.prog.Values[op.In[0]]
	w := &pr.prog.Params[op.Params[0]]
	d := float64(x.Shape[len(x.Shape)-1])
	vocab := float64(w.Shape[0])
	if vocab <= 0 || d <= 0 {
		return pr.stream(op, op.Bytes)
	}
	tokens := op.Flops / 2 / (vocab * d)
	dt := x.Dtype
	if pr.autocastDT != units.InvalidDType {
		dt = pr.autocastDT
	}
	in := elemBytes(dt)
	tiles := tokens * vocab * in
	c := OpCost{FwdK: 2, Flops: op.Flops, Bytes: (tokens*d+vocab*d)*in + 2*tiles}
	gemm, bound := gemmTime(&pr.d, dt, 1, tokens, vocab, d, in, in)
	fold, _ := streamTime(&pr.d, tiles)
	c.Fwd, c.Bound = gemm+fold, bound
	input, weight := pr.needsGrad(op)
	if !input && !weight {
		return c
	}
	refold, _ := streamTime(&pr.d, 2*tiles) // read and rewritten in place
	c.Bwd, c.BwdK = gemm+refold, 2
	if input { // grad_hidden += tile @ w_chunk: tokens x hidden over the vocabulary
		t, _ := gemmTime(&pr.d, dt, 1, tokens, d, vocab, in, 4)
		c.Bwd += t
		c.Dgrad = t
		c.BwdK++
	}
	if weight { // grad_weight += tile^T @ hidden_chunk: vocabulary x hidden over the tokens
		t, _ := gemmTime(&pr.d, dt, 1, vocab, d, tokens, in, 4)
		c.Bwd += t
		c.Wgrad = t
		c.BwdK++
	}
	return c
}
