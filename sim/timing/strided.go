package timing

import "github.com/memsh/memsh/sim/core"

// stridedOp prices, on a GPU whose eager kernels were measured
// (hw.GraphKernels.Broadcast) and in eager dispatch, an elementwise op
// whose last input is a strided view (core.OpInfo.Strided): transformers
// 5.17's grouped_mm experts split gate_up's [S, 2h] output with
// gate_up_out.chunk(2, dim=-1) (_default_apply_gate, integrations/moe.py)
// and run self.act_fn(gate) * up on the two halves, views whose rows are
// 2h apart. A strided operand takes TensorIterator off its vectorized
// path (as a broadcast one does, row_broadcast.go): each kernel that
// reads it is the generic elementwise_kernel<128, 4> with an offset
// calculator, priced at the generic kernel's measured fraction of the
// peak (Broadcast, measured on PyG's per-head multiply: 0.346 for 2-byte
// operands). Kernels that read only contiguous tensors keep the stream
// rate. ok is false for other ops (they keep stream's price).
//
//   - The activation (silu, gelu: one input, the strided gate): its
//     forward reads gate and writes act(gate); its backward,
//     silu_backward(grad, gate), reads the gradient and gate and writes
//     gate's gradient: both generic.
//   - The product act(gate) * up (up strided): the forward is generic;
//     of its backward, grad * up (act's gradient) reads up: generic;
//     grad * act(gate) (up's gradient) reads contiguous tensors: the
//     stream rate.
//
// The profile of one small Mixtral step on an H200 (hf_profile.jsonl,
// mixtral_bf16, run 19: 16,384 routed rows of 3,584) shows the
// activation's two kernels as the generic ones: silu_kernel 8 calls in
// 1.274 ms (0.307 of the peak), silu_backward_kernel 8 calls in 1.462
// ms (0.401), which the Broadcast fraction (0.346) sits between.
func (pr *pricer) stridedOp(op *core.OpInfo) (OpCost, bool) {
	g, ok := pr.graphRates()
	if !ok || !op.Strided || pr.dispatch != DispatchEager || len(op.In) == 0 || len(op.Out) != 1 {
		return OpCost{}, false
	}
	p := pr.prog
	out := &p.Values[op.Out[0]]
	strided := &p.Values[op.In[len(op.In)-1]]
	frac := broadcastFrac(g, strided.Dtype, out.Dtype)
	if frac <= 0 || (len(op.In) == 2 && op.Kind != "mul") || len(op.In) > 2 {
		return OpCost{}, false
	}
	generic := frac * pr.peakBytes()
	s := streamRate(&pr.d)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: op.Bytes}
	c.Fwd, c.Bound = kernelTime(0, op.Bytes/generic)
	if !p.GradsInputs(op) {
		return c, true
	}
	ob := float64(out.Bytes)
	var bwd float64
	for j, v := range op.In {
		in := &p.Values[v]
		if !in.Grad {
			continue
		}
		k := ob + float64(in.Bytes) // the output's gradient in, this input's gradient out
		if len(op.In) == 1 {
			bwd += (k + float64(strided.Bytes)) / generic // act's backward reads the strided input
		} else if other := &p.Values[op.In[1-j]]; j == 0 {
			bwd += (k + float64(other.Bytes)) / generic // grad * up: up is the strided operand
		} else {
			bwd += (k + float64(other.Bytes)) / s // grad * act(gate): contiguous
		}
		c.BwdK++
	}
	if c.BwdK > 0 {
		c.Bwd, _ = kernelTime(0, bwd)
		c.Bwd = max(c.Bwd, c.BwdK*kernelFloor)
	}
	return c, true
}
