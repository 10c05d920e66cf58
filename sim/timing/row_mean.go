package timing

import "github.com/memsh/memsh/sim/core"

// rowMean prices, on a GPU whose eager kernels were measured
// (hw.GraphKernels.Broadcast) and in eager dispatch, a mean over the last
// dimension kept as a [rows, 1] statistic (Hugging Face's RMSNorm:
// hidden_states.pow(2).mean(-1, keepdim=True)): the forward reduction
// reads its whole input (at the stream rate), and its backward,
// mean_backward (torch/csrc/autograd/FunctionsManual.cpp: the gradient
// expanded to the input's shape, divided by n), is one kernel writing
// an input-sized gradient from an expanded (stride 0) operand:
// TensorIterator's generic kernel, at the Broadcast fraction of the peak
// for the input's width. ok is false for other means.
//
// The profile of one Qwen3-0.6B step on an H200 (hf_profile.jsonl, run
// 19) shows that backward: elementwise_kernel<128, 2> of
// BUnaryFunctor<float, float, float, MulFunctor> (the division by n, a
// multiply by 1/n), 113 calls in 5.76 ms, four norms a layer and the
// final one: their 9.45 GB written at 0.34 of the peak, slower than the
// Broadcast multiply's 0.569 for fp32 that memsh takes.
func (pr *pricer) rowMean(op *core.OpInfo) (OpCost, bool) {
	g, ok := pr.graphRates()
	if !ok || op.Kind != "mean" || pr.dispatch != DispatchEager || len(op.In) != 1 || len(op.Out) != 1 {
		return OpCost{}, false
	}
	p := pr.prog
	in, out := &p.Values[op.In[0]], &p.Values[op.Out[0]]
	if len(in.Shape) == 0 || len(out.Shape) == 0 || out.Shape[len(out.Shape)-1] != 1 || in.Shape[len(in.Shape)-1] <= 1 ||
		core.Rows(in.Shape) != core.Rows(out.Shape) {
		return OpCost{}, false
	}
	frac := broadcastFrac(g, in.Dtype, in.Dtype)
	if frac <= 0 {
		return OpCost{}, false
	}
	ib, ob := float64(in.Bytes), float64(out.Bytes)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: ib + ob}
	c.Fwd, c.Bound = streamTime(&pr.d, ib+ob)
	if in.Grad && p.GradsInputs(op) {
		c.Bwd, _ = kernelTime(0, (ib+ob)/(frac*pr.peakBytes()))
		c.BwdK = 1
	}
	return c, true
}
