package timing

import (
	"github.com/memsh/memsh/sim/core"
)

// rowBroadcastMul prices, on a GPU whose eager kernels were measured
// (hw.GraphKernels.Broadcast), the multiplies of Hugging Face's eager
// RMSNorm (LlamaRMSNorm and its copies, Qwen3's q_norm and k_norm over
// heads): hidden_states * torch.rsqrt(variance + eps), a [rows, d] tensor
// by its [rows, 1] statistic, and self.weight * hidden_states, by a [d]
// parameter. Each has a broadcast operand (a stride of 0), so
// TensorIterator cannot take its vectorized path and runs the generic
// elementwise_kernel<128, N> with an offset calculator (the kernel of
// PyG's per-head multiply, which hw.GraphKernels.Broadcast measured:
// 0.346 of the HBM peak for 2-byte operands, 0.569 for fp32, 0.300 for a
// 2-byte input with an fp32 output). ok is false for other multiplies.
//
// The backward: the wide operand's gradient, grad * narrow, is the same
// broadcast multiply; the narrow operand's (a row statistic or the
// weight), (grad * wide).sum_to_size(narrow), a contiguous multiply and a
// reduction at the stream rate.
//
// The profile of one Qwen3-0.6B step on an H200 (hf_profile.jsonl, run
// 19) shows these kernels: 506 bf16 and 282 fp32 calls of the generic
// kernel (34.0 and 20.6 ms) against 24 and 8 ms of vectorized multiplies.
func (pr *pricer) rowBroadcastMul(op *core.OpInfo) (OpCost, bool) {
	g, ok := pr.graphRates()
	if !ok || len(op.Out) != 1 || pr.dispatch != DispatchEager {
		return OpCost{}, false
	}
	p := pr.prog
	out := &p.Values[op.Out[0]]
	if len(out.Shape) < 2 {
		return OpCost{}, false
	}
	last := out.Shape[len(out.Shape)-1]
	var wide, narrowB float64
	var wideDT = out.Dtype
	wideGrad, narrowGrad := false, false
	switch {
	case len(op.In) == 2 && len(op.Params) == 0: // x * rsqrt(variance)
		w, n := &p.Values[op.In[0]], &p.Values[op.In[1]]
		if n.Bytes > w.Bytes {
			w, n = n, w
		}
		if !rowStat(w.Shape, n.Shape) || last <= 1 {
			return OpCost{}, false
		}
		wide, narrowB, wideDT = float64(w.Bytes), float64(n.Bytes), w.Dtype
		wideGrad, narrowGrad = w.Grad, n.Grad
	case len(op.In) == 1 && len(op.Params) == 1: // weight * hidden_states
		w, q := &p.Values[op.In[0]], &p.Params[op.Params[0]]
		if q.Numel != last || core.Numel(w.Shape) <= last {
			return OpCost{}, false
		}
		wide, narrowB, wideDT = float64(w.Bytes), float64(q.Numel)*elemBytes(pr.paramsDT), w.Dtype
		wideGrad = w.Grad
		_, narrowGrad = pr.needsGrad(op)
	default:
		return OpCost{}, false
	}
	frac := broadcastFrac(g, wideDT, out.Dtype)
	if frac <= 0 {
		return OpCost{}, false
	}
	peak := pr.peakBytes()
	ob := float64(out.Bytes)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: wide + narrowB + ob}
	c.Fwd, c.Bound = kernelTime(0, (wide+narrowB+ob)/(frac*peak))
	s := streamRate(&pr.d)
	var bwd float64
	if wideGrad {
		if f := broadcastFrac(g, out.Dtype, out.Dtype); f > 0 {
			bwd += (2*ob + narrowB) / (f * peak)
		} else {
			bwd += (2*ob + narrowB) / s
		}
		c.BwdK++
	}
	if narrowGrad {
		bwd += (3*ob + wide + narrowB) / s // grad * wide, then its reduction to the narrow shape
		c.BwdK += 2
	}
	if c.BwdK > 0 {
		c.Bwd, _ = kernelTime(0, bwd)
		c.Bwd = max(c.Bwd, c.BwdK*kernelFloor)
	}
	return c, true
}

// rowStat reports whether narrow is wide's per-row statistic: the same
// leading dimensions and a last dimension of 1.
func rowStat(wide, narrow []int64) bool {
	if len(wide) < 2 || len(wide) != len(narrow) || narrow[len(narrow)-1] != 1 {
		return false
	}
	for i := range len(wide) - 1 {
		if wide[i] != narrow[i] {
			return false
		}
	}
	return true
}
