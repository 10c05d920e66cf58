package timing

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// eagerFraction is the fraction of the stream rate the forward kernel of
// op reaches where the device measured it (hw.EagerKernels), 0 for the
// stream rate: eager attention's causal masked_fill (a broadcast bool
// mask) and softmax, by its row length, both with 2-byte input and
// output (the dtypes measured), a masked_fill of 2-byte rows by a
// broadcast mask (transformers 5's grouped_mm experts zero their
// sentinel rows so: the causal mask's generic kernel), and a cast from a
// 2-byte float to fp32.
// Backwards keep the stream rate, except a cast's, which is the cast the
// other way (upcastBack), and a masked_fill's by a broadcast mask: its
// backward is grad.masked_fill(mask, 0) (derivatives.yaml), the same
// kernels over the same bytes, measured on one H200 at 2.05 ms against
// the forward's 1.91 (sim/testdata/cuda_h200/bwd_kernels.jsonl,
// masked_fill_bf16 at [4, 32, 2048, 2048]: a device-to-device copy and
// the masked_fill kernel each way; tools/oracle/cuda_bwd_kernels.py), so
// it takes the forward's price (ops.go, stream). Eager attention's
// causal mask ("mask") keeps the stream rate backward: its backward
// kernels are the rule's to change with the CUDA oracle rows it moves
// (TestOracleCUDAStepTime).
func eagerFraction(d *hw.Device, prog *core.Program, op *core.OpInfo) float64 {
	e := &d.RatesRef().Eager
	switch op.Kind {
	case "mask", "softmax":
	case "masked_fill": // transformers 5's grouped_mm experts: y.masked_fill(sentinel_mask, 0), an [S, 1] mask
		if len(op.In) == 2 && len(op.Out) == 1 && broadcastOver(&prog.Values[op.In[1]], &prog.Values[op.Out[0]]) &&
			elemBytes(prog.Values[op.Out[0]].Dtype) == 2 {
			return e.MaskedFill
		}
		return 0
	case "cast":
		if len(op.In) > 0 && len(op.Out) > 0 && upcast(prog.Values[op.In[0]].Dtype, prog.Values[op.Out[0]].Dtype) {
			return e.Upcast
		}
		return 0
	default:
		return 0
	}
	if len(op.In) == 0 || len(op.Out) == 0 {
		return 0
	}
	in, out := &prog.Values[op.In[0]], &prog.Values[op.Out[0]]
	if elemBytes(in.Dtype) != 2 || elemBytes(out.Dtype) != 2 || len(out.Shape) == 0 {
		return 0 // measured on bf16 scores only
	}
	switch {
	case op.Kind == "mask" && strings.HasSuffix(op.Name, "causal_mask"):
		return e.MaskedFill
	case op.Kind == "mask":
		return 0 // another mask (mllama's): not measured
	case out.Shape[len(out.Shape)-1] <= hw.SoftmaxShortRow:
		return e.SoftmaxShort
	}
	return e.SoftmaxLong
}

// broadcastOver reports whether operand a is broadcast over out: fewer
// elements, more than one (a one-element operand is a scalar to
// TensorIterator, which keeps its vectorized path).
func broadcastOver(a, out *core.ValueInfo) bool {
	n := core.Numel(a.Shape)
	return n > 1 && n < core.Numel(out.Shape)
}

// upcast reports whether a copy from dtype from to dtype to is ATen's
// unvectorized one on CUDA: a 2-byte float to fp32 (hw.EagerKernels.Upcast).
func upcast(from, to units.DType) bool {
	return (from == units.BF16 || from == units.FP16) && to == units.FP32
}

// upcastBack is the fraction of the stream rate at which the backward of
// a cast, the cast back (ToCopyBackward0), runs where it is an upcast
// (the forward casts fp32 to a 2-byte float: an activation, or autocast's
// copy of an fp32 weight) on a GPU that measured it; 0 for the stream
// rate. Eager kernels only: a compiled graph's casts are Inductor's.
func (pr *pricer) upcastBack(op *core.OpInfo) float64 {
	if pr.dispatch.fuses() || len(op.Out) == 0 {
		return 0
	}
	from := pr.paramsDT // a weight's cast reads the parameter
	if len(op.In) > 0 {
		from = pr.prog.Values[op.In[0]].Dtype
	}
	if !upcast(pr.prog.Values[op.Out[0]].Dtype, from) {
		return 0
	}
	return pr.d.RatesRef().Eager.Upcast
}
