package timing

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// eagerFraction is the fraction of the stream rate the forward kernel of
// op reaches where the device measured it (hw.EagerKernels), 0 for the
// stream rate: eager attention's causal masked_fill (a broadcast bool
// mask) and softmax, by its row length, both with 2-byte input and
// output (the dtypes measured).
// Backwards keep the stream rate: their kernels were not measured alone.
func eagerFraction(d *hw.Device, prog *core.Program, op *core.OpInfo) float64 {
	e := &ratesOf(d).Eager
	switch op.Kind {
	case "mask", "softmax":
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
