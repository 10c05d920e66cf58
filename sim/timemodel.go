package sim

// The compute part of the time model: a roofline per op of the replayed
// program, with efficiency terms per op class. Communication, pipeline
// bubbles and host transfers are added by their own models (comm, pipeline,
// offload) on top of these figures.
//
// Efficiency terms (fractions of the device's dense peak; assumptions,
// checked against the MFU figures of calibration.md D and issue 8):
//   - gemmEfficiency: large bf16 GEMMs reach 70-80 % of dense peak with
//     cuBLAS on A100/H100 (NVIDIA's published GEMM benchmarks); we take 0.75.
//   - attentionEfficiency: FlashAttention-2 reaches 50-73 % of peak on A100
//     and 35-50 % on H100 forward+backward (Dao 2023, FlashAttention-2,
//     figures 4-7); we take 0.5.
//   - memoryEfficiency: elementwise and normalisation kernels reach ~80 % of
//     HBM bandwidth (STREAM-like copy kernels on A100/H100).
const (
	gemmEfficiency      = 0.75
	attentionEfficiency = 0.5
	memoryEfficiency    = 0.8
	// Backward costs relative to forward: two GEMMs (input and weight
	// gradients) per forward GEMM; FlashAttention-2's backward runs five
	// matmuls against the forward's two (2.5x).
	gemmBackward      = 2.0
	attentionBackward = 2.5
	memoryBackward    = 2.0
)

// ComputeTime is the compute-time estimate of one micro-batch.
type ComputeTime struct {
	Forward, Backward, Recompute, Optimizer float64 // seconds
}

// peakFLOPS is the dense peak for matmuls in dtype dt, FLOP/s.
func peakFLOPS(d Device, dt DType) float64 {
	switch dt {
	case FP32:
		if d.FP32TFLOPS > 0 {
			return d.FP32TFLOPS * 1e12
		}
		return d.BF16TFLOPS * 1e12 / 16
	case TF32:
		return d.BF16TFLOPS * 1e12 / 2
	case FP8:
		if d.FP8TFLOPS > 0 {
			return d.FP8TFLOPS * 1e12
		}
	}
	return d.BF16TFLOPS * 1e12
}

// opTime is the forward and backward time of one op on device d.
func opTime(op *opInfo, prog *program, d Device) (fwd, bwd float64) {
	mem := op.bytes / (d.HBMGBps * 1e9 * memoryEfficiency)
	if d.HBMGBps <= 0 {
		mem = 0
	}
	dt := BF16
	if len(op.out) > 0 {
		dt = prog.values[op.out[0]].dtype
	}
	switch op.kind {
	case "matmul", "grouped_matmul":
		c := op.flops / (peakFLOPS(d, dt) * gemmEfficiency)
		fwd = max(c, mem)
		return fwd, gemmBackward * fwd
	case "attention":
		c := op.flops / (peakFLOPS(d, dt) * attentionEfficiency)
		fwd = max(c, mem)
		return fwd, attentionBackward * fwd
	}
	return mem, memoryBackward * mem
}

// computeTime sums the roofline over the program: forward, backward,
// the recompute of checkpointed regions, and the optimizer's HBM traffic.
func computeTime(prog *program, d Device, recomputed []bool, optimizerBytes int64) ComputeTime {
	var t ComputeTime
	fwdOf := make([]float64, len(prog.ops))
	for i := range prog.ops {
		f, b := opTime(&prog.ops[i], prog, d)
		fwdOf[i] = f
		t.Forward += f
		t.Backward += b
	}
	for id, done := range recomputed {
		if !done {
			continue
		}
		reg := prog.regions[id]
		for j := reg.first; j < reg.end; j++ {
			t.Recompute += fwdOf[j]
		}
	}
	if d.HBMGBps > 0 {
		t.Optimizer = float64(optimizerBytes) / (d.HBMGBps * 1e9 * memoryEfficiency)
	}
	return t
}

// stepTime turns the replay's compute figures into a step-time estimate for
// one GPU: grad_accum micro-batches of forward, backward and recompute, then
// the optimizer step. MFU counts model FLOPs (no recompute) against the
// device's dense peak in the compute dtype; HFU counts recompute too.
func stepTime(prog *program, plan *Plan, r *replay) TimeEstimate {
	d := plan.Device
	ct := computeTime(prog, d, r.redone, r.rep.Traffic.HBM)
	n := float64(plan.GradAccum)
	if plan.Phase == "eval" {
		ct.Backward, ct.Recompute, ct.Optimizer = 0, 0, 0
	}
	step := n*(ct.Forward+ct.Backward+ct.Recompute) + ct.Optimizer
	te := TimeEstimate{StepSeconds: step, Breakdown: []TimeShare{
		{"forward", n * ct.Forward}, {"backward", n * ct.Backward},
		{"recompute", n * ct.Recompute}, {"optimizer", ct.Optimizer},
	}}
	if step > 0 {
		peak := peakFLOPS(d, plan.Precision.Compute)
		te.MFU = n * r.rep.FLOPs.Model / (step * peak)
		te.HFU = n * r.rep.FLOPs.Hardware / (step * peak)
		te.TokensPerS = float64(plan.Batch*plan.Seq*plan.Members) * n / step
	}
	return te
}
