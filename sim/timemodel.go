package sim

import (
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

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
func peakFLOPS(d hw.Device, dt units.DType) float64 {
	switch dt {
	case units.FP32:
		if d.FP32TFLOPS > 0 {
			return d.FP32TFLOPS * 1e12
		}
		return d.BF16TFLOPS * 1e12 / 16
	case units.TF32:
		return d.BF16TFLOPS * 1e12 / 2
	case units.FP8:
		if d.FP8TFLOPS > 0 {
			return d.FP8TFLOPS * 1e12
		}
	}
	return d.BF16TFLOPS * 1e12
}

// opTime is the forward and backward time of one op on device d.
func opTime(op *opInfo, prog *program, d hw.Device) (fwd, bwd float64) {
	mem := op.bytes / (d.HBMGBps * 1e9 * memoryEfficiency)
	if d.HBMGBps <= 0 {
		mem = 0
	}
	dt := units.BF16
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
// attn is the attention kernels' share of forward, backward and recompute
// (context parallelism hides its ring exchange behind them).
func computeTime(prog *program, d hw.Device, recomputed []bool, optimizerBytes int64) (t ComputeTime, attn float64) {
	fwdOf := make([]float64, len(prog.ops))
	for i := range prog.ops {
		f, b := opTime(&prog.ops[i], prog, d)
		fwdOf[i] = f
		t.Forward += f
		t.Backward += b
		if prog.ops[i].kind == "attention" {
			attn += f + b
		}
	}
	for id, done := range recomputed {
		if !done {
			continue
		}
		reg := prog.regions[id]
		for j := reg.first; j < reg.end; j++ {
			t.Recompute += fwdOf[j]
			if prog.ops[j].kind == "attention" {
				attn += fwdOf[j]
			}
		}
	}
	if d.HBMGBps > 0 {
		t.Optimizer = float64(optimizerBytes) / (d.HBMGBps * 1e9 * memoryEfficiency)
	}
	return t, attn
}

// gpuWork is what one GPU does in a step, the time model's input: m
// micro-batches of the same work (on a pipeline stage, one micro-batch
// through each of the stage's model chunks), the collectives that come
// with them, and what happens once per step (data-parallel gradient and
// parameter traffic, the optimizer step, host transfers).
type gpuWork struct {
	m  int64       // micro-batches per step
	mb ComputeTime // compute of one micro-batch (Optimizer unused)
	// attn is the attention kernels' share of mb (forward, backward and
	// recompute).
	attn float64
	// flops and hwFlops are the model FLOPs (forward and backward, no
	// recompute) and hardware FLOPs (with recompute) of one micro-batch.
	flops, hwFlops float64
	mbComm         []commSum    // collectives of one micro-batch (tp, cp, ep, pp), aggregated
	ppSend, ppRecv int64        // activations sent and received per micro-batch and direction
	dpComm         []commRecord // data-parallel collectives of the step (comm.go's inventory)
	mode           distMode
	zero           int
	optimizer      float64 // the optimizer step, seconds
	host           float64 // offload transfers and host-placed tables, seconds (not overlapped)
	tokens         float64 // tokens per step over all data-parallel replicas
	eval           bool
}

// gpuTime is one GPU's step split by cause: the per-micro-batch part
// (perMB, paid m times, or once per micro-batch slot of a pipeline) and
// the once-per-step tail.
type gpuTime struct {
	perMB []TimeShare // forward, backward, recompute, exposed tp/cp/ep/pp/fsdp communication
	tail  []TimeShare // exposed data-parallel communication, optimizer, offload
	mbSec float64
	tlSec float64
}

// stepTime turns the replay's figures into a step-time estimate for one
// GPU: m micro-batches of forward, backward, recompute and exposed
// communication, then the data-parallel reduction's exposed part, the
// optimizer step and host transfers. A pipeline stage's estimate is its
// own; the pipeline's step (bubble included) is composed over the stages
// by pipelineTime. MFU counts model FLOPs (no recompute) against the
// device's dense peak in the compute dtype; HFU counts recompute too.
func stepTime(prog *program, plan *Plan, r *replay) TimeEstimate {
	w, err := workOf(prog, plan, r)
	if err != nil {
		return TimeEstimate{Notes: []string{"time model: " + err.Error()}}
	}
	gt := w.times(plan)
	step := float64(w.m)*gt.mbSec + gt.tlSec
	te := TimeEstimate{StepSeconds: step}
	for _, s := range gt.perMB {
		te.Breakdown = append(te.Breakdown, TimeShare{s.Name, float64(w.m) * s.Seconds})
	}
	te.Breakdown = append(te.Breakdown, gt.tail...)
	if plan.pipeStage != nil {
		te.stage = &stageTime{work: w, time: gt}
	}
	w.utilisation(plan, &te, 1)
	return te
}

// utilisation fills MFU, HFU and tokens/s of te from w's per-micro-batch
// FLOPs; stages is the number of pipeline stages sharing the step (the
// FLOPs of all of them are counted, and their GPUs).
func (w *gpuWork) utilisation(plan *Plan, te *TimeEstimate, stages int64) {
	step := te.StepSeconds
	if step <= 0 {
		return
	}
	peak := peakFLOPS(plan.Device, plan.Precision.Compute)
	te.MFU = float64(w.m) * w.flops / (float64(stages) * step * peak)
	te.HFU = float64(w.m) * w.hwFlops / (float64(stages) * step * peak)
	te.TokensPerS = w.tokens / step
}

// workOf gathers the time model's inputs from a replayed program.
func workOf(prog *program, plan *Plan, r *replay) (*gpuWork, error) {
	d := plan.Device
	par := plan.Parallel.norm()
	w := &gpuWork{m: max(plan.GradAccum, 1), eval: plan.Phase == "eval"}
	mbProg, redone := prog, r.redone
	w.flops, w.hwFlops = r.rep.FLOPs.Model, r.rep.FLOPs.Hardware
	if st := plan.pipeStage; st != nil {
		w.m = plan.microBatches()
		p, err := plan.stageMicroBatch() // pipeline_time.go: one copy of each chunk
		if err != nil {
			return nil, err
		}
		mbProg, redone = p, allRedone(p, w.eval)
		w.flops, w.hwFlops = programFLOPs(p, w.eval)
		w.ppRecv, w.ppSend = stageTransfers(par, st.stage)
	}
	optBytes := r.rep.Traffic.HBM
	if r.dist != nil {
		w.mode, w.zero = r.dist.mode, par.Zero
		optBytes = r.shardedOptimizerTraffic()
		for _, c := range r.dist.commPerStep() {
			if c.group == "dp" || c.group == "edp" {
				w.dpComm = append(w.dpComm, c)
			}
		}
	}
	ct, attn := computeTime(mbProg, d, redone, optBytes)
	w.mb, w.attn, w.optimizer = ct, attn, ct.Optimizer
	w.mbComm = sumComm(mbProg.comm, nil, 1)
	if w.eval {
		w.mb.Backward, w.mb.Recompute, w.optimizer = 0, 0, 0
		w.hwFlops = w.flops // forward only: nothing recomputed
	}
	w.host = r.hostSeconds()
	w.tokens = float64(plan.Batch*plan.Seq*max(plan.Members, 1)) * float64(w.m) * float64(par.DP)
	return w, nil
}

// allRedone marks every checkpoint region as recomputed: a training
// step's backward reaches every op, and the first op of a region it
// reaches re-runs the region's forward (replay.go backwardOp).
func allRedone(p *program, eval bool) []bool {
	out := make([]bool, len(p.regions))
	for i := range out {
		out[i] = !eval
	}
	return out
}

// programFLOPs is the model and hardware FLOPs of one pass of p, as the
// replay counts them: forward + backward = 3 x forward, plus the forward
// of recomputed regions.
func programFLOPs(p *program, eval bool) (model, hardware float64) {
	var fwd, rec float64
	for i := range p.ops {
		fwd += p.ops[i].flops
		if p.ops[i].region != 0 && !eval {
			rec += p.ops[i].flops
		}
	}
	if eval {
		return fwd, fwd
	}
	return 3 * fwd, 3*fwd + rec
}

// shardedOptimizerTraffic is the optimizer step's HBM traffic on this GPU
// when data parallelism shards the step: ZeRO, FSDP and Megatron's
// distributed optimizer update this rank's partition only (1/dp of every
// parameter, 1/(dp/ep) of expert parameters); DDP and Megatron without the
// distributed optimizer update every parameter.
func (r *replay) shardedOptimizerTraffic() int64 {
	d := r.dist
	if d.zeroOffload(r) || d.fsdpOffload(r) {
		return 0 // the step runs on the host (shard_offload.go, fsdp_offload.go); its PCIe traffic is timed as offload
	}
	sharded := d.mode == distZeRO || d.mode == distFSDP || (d.mode == distMegatron && d.par.DistributedOptimizer)
	var t int64
	for pi := range r.p.params {
		p := &r.p.params[pi]
		if p.tiedTo >= 0 || !p.trainable {
			continue
		}
		b := r.optimizerTraffic(p)
		if sharded {
			b /= d.degree(int32(pi))
		}
		t += b
	}
	return t
}

// times splits the work into exposed time by cause.
func (w *gpuWork) times(plan *Plan) gpuTime {
	g := gpuTime{perMB: make([]TimeShare, 0, 8), tail: make([]TimeShare, 0, 3)}
	add := func(list *[]TimeShare, name string, s float64) {
		*list = append(*list, TimeShare{name, s})
	}
	mb := w.mb
	add(&g.perMB, "forward", mb.Forward)
	add(&g.perMB, "backward", mb.Backward)
	add(&g.perMB, "recompute", mb.Recompute)
	c := w.exposedComm(plan)
	for _, s := range c.perMB {
		add(&g.perMB, s.Name, s.Seconds)
	}
	for _, s := range c.tail {
		add(&g.tail, s.Name, s.Seconds)
	}
	add(&g.tail, "optimizer", w.optimizer)
	add(&g.tail, "offload", w.host)
	for _, s := range g.perMB {
		g.mbSec += s.Seconds
	}
	for _, s := range g.tail {
		g.tlSec += s.Seconds
	}
	return g
}
