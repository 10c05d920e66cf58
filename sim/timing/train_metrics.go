package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// trainMetricsTime is the GPU time of the training loop's cross-entropy
// metrics on one micro-batch (core.Overheads.TrainMetrics), and at the
// loss op whose logits they read (-1: none): Prices.Of adds it to that
// op's forward, so every path that prices ops (the replay's step, the
// search's profiles, r.modules) has it. Each metric is
// torch.nn.CrossEntropyLoss(reduction="sum") over the logits the loss
// read, forward only (torch.no_grad), in the precision's context. Under
// autocast cross-entropy runs in fp32, so 16-bit logits are first cast
// (read once, written twice as wide); then log_softmax's forward over
// rows wider than a block's shared memory (softmaxSmemBytes: every
// language model's vocabulary) is cunn_SoftMaxForward
// (aten/src/ATen/native/cuda/SoftMax.cu, host_softmax): one block a row
// reads it three times (ilpReduce for the max, again for the sum of
// exponentials, WriteFpropResults for the output) and writes it once; a
// narrower row is read once. nll_loss reads a log-probability a row. The
// metric's own sums (the loss and the count of labels not ignored) are
// small kernels, at the kernel floor. The logits are those of the
// program's cross-entropy op (the fused or the eager loss). A
// vocabulary-parallel, chunked or linear-fused cross-entropy, or another
// loss, leaves no whole logits to measure: 0, and the note says why (a
// metric asked for and not priced is not a silent 0); a pipeline stage
// without the loss has none, and no note.
func trainMetricsTime(prog *core.Program, plan *core.Plan) (at int, t float64, note string) {
	n := plan.Overheads.TrainMetrics
	at = -1
	if n <= 0 || plan.Phase == core.Eval {
		return at, 0, ""
	}
	var x, lab *core.ValueInfo
	for i := range prog.Ops {
		op := &prog.Ops[i]
		switch op.Kind {
		case "fused_linear_cross_entropy", core.CCEOp, core.TRLLogProbOp:
			return -1, 0, trainMetricsNote("the loss is fused with the output projection (no logits)")
		case "mse_loss":
			return -1, 0, trainMetricsNote("the loss is not a cross-entropy over logits")
		case "cross_entropy":
		default:
			continue
		}
		switch {
		case len(op.In) != 2: // loss_parallel.go: each rank holds a vocabulary shard of the logits
			return -1, 0, trainMetricsNote("the loss is vocabulary-parallel (no rank holds whole logits)")
		case x != nil: // a chunked loss: one chunk's logits would price a fraction of them
			return -1, 0, trainMetricsNote("the loss is chunked (no whole logits)")
		}
		x, lab, at = &prog.Values[op.In[0]], &prog.Values[op.In[1]], i
	}
	if x == nil || len(x.Shape) == 0 { // a pipeline stage before the loss's
		return -1, 0, ""
	}
	d := &plan.Device
	elems := float64(core.Numel(x.Shape))
	dt := x.Dtype
	if plan.Precision.Autocast && dt != units.FP32 {
		c, _ := streamTime(d, elems*float64(dt.Bytes(1)+units.FP32.Bytes(1)))
		t += c
		dt = units.FP32
	}
	xb := elems * float64(dt.Bytes(1))
	reads := 3.0
	if row := xb / float64(max(core.Rows(x.Shape), 1)); row < softmaxSmemBytes {
		reads = 1
	}
	ls, _ := streamTime(d, (reads+1)*xb)
	nll, _ := streamTime(d, 2*float64(lab.Bytes))
	t += max(ls, kernelFloor) + max(nll, kernelFloor) + trainMetricSmallKernels*kernelFloor
	return at, float64(n) * t, ""
}

// trainMetricsNote is the time note of train metrics asked for and not
// priced, and why.
func trainMetricsNote(why string) string {
	return "train_metrics not priced: " + why + "; their time is not in the step"
}

// trainMetricSmallKernels is a metric's kernels besides the cast,
// log_softmax and nll_loss: the loss added to sum_loss, target !=
// ignore_index, its sum, and that added to total_items.
const trainMetricSmallKernels = 4
