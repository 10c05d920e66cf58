package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
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
	MemoryEfficiency    = 0.8
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
func OpTime(op *core.OpInfo, prog *core.Program, d hw.Device) (fwd, bwd float64) {
	mem := op.Bytes / (d.HBMGBps * 1e9 * MemoryEfficiency)
	if d.HBMGBps <= 0 {
		mem = 0
	}
	dt := units.BF16
	if len(op.Out) > 0 {
		dt = prog.Values[op.Out[0]].Dtype
	}
	switch op.Kind {
	case "matmul", "grouped_matmul":
		c := op.Flops / (peakFLOPS(d, dt) * gemmEfficiency)
		fwd = max(c, mem)
		return fwd, gemmBackward * fwd
	case "attention":
		c := op.Flops / (peakFLOPS(d, dt) * attentionEfficiency)
		fwd = max(c, mem)
		return fwd, attentionBackward * fwd
	}
	return mem, memoryBackward * mem
}

// computeTime sums the roofline over the program: forward, backward,
// the recompute of checkpointed regions, and the optimizer's HBM traffic.
// attn is the attention kernels' share of forward, backward and recompute
// (context parallelism hides its ring exchange behind them).
func computeTime(prog *core.Program, d hw.Device, recomputed []bool, optimizerBytes int64) (t ComputeTime, attn float64) {
	fwdOf := make([]float64, len(prog.Ops))
	for i := range prog.Ops {
		f, b := OpTime(&prog.Ops[i], prog, d)
		fwdOf[i] = f
		t.Forward += f
		t.Backward += b
		if prog.Ops[i].Kind == "attention" {
			attn += f + b
		}
	}
	for id, done := range recomputed {
		if !done {
			continue
		}
		reg := prog.Regions[id]
		for j := reg.First; j < reg.End; j++ {
			t.Recompute += fwdOf[j]
			if prog.Ops[j].Kind == "attention" {
				attn += fwdOf[j]
			}
		}
	}
	if d.HBMGBps > 0 {
		t.Optimizer = float64(optimizerBytes) / (d.HBMGBps * 1e9 * MemoryEfficiency)
	}
	return t, attn
}

// gpuWork is what one GPU does in a step, the time model's input: m
// micro-batches of the same work (on a pipeline stage, one micro-batch
// through each of the stage's model chunks), the collectives that come
// with them, and what happens once per step (data-parallel gradient and
// parameter traffic, the optimizer step, host transfers).
type GpuWork struct {
	M  int64       // micro-batches per step
	Mb ComputeTime // compute of one micro-batch (Optimizer unused)
	// attn is the attention kernels' share of mb (forward, backward and
	// recompute).
	Attn float64
	// flops and hwFlops are the model FLOPs (forward and backward, no
	// recompute) and hardware FLOPs (with recompute) of one micro-batch.
	Flops, HwFlops float64
	MbComm         []CommSum         // collectives of one micro-batch (tp, cp, ep, pp), aggregated
	PpSend, PpRecv int64             // activations sent and received per micro-batch and direction
	DpComm         []core.CommRecord // data-parallel collectives of the step (comm.go's inventory)
	Mode           replay.DistMode
	Zero           int
	Optimizer      float64 // the optimizer step, seconds
	host           float64 // offload transfers and host-placed tables, seconds (not overlapped)
	Tokens         float64 // tokens per step over all data-parallel replicas
	Eval           bool
}

// gpuTime is one GPU's step split by cause: the per-micro-batch part
// (perMB, paid m times, or once per micro-batch slot of a pipeline) and
// the once-per-step tail.
type gpuTime struct {
	PerMB []replay.TimeShare // forward, backward, recompute, exposed tp/cp/ep/pp/fsdp communication
	Tail  []replay.TimeShare // exposed data-parallel communication, optimizer, offload
	MbSec float64
	TlSec float64
}

// stepTime turns the replay's figures into a step-time estimate for one
// GPU: m micro-batches of forward, backward, recompute and exposed
// communication, then the data-parallel reduction's exposed part, the
// optimizer step and host transfers. A pipeline stage's estimate is its
// own; the pipeline's step (bubble included) is composed over the stages
// by pipelineTime. MFU counts model FLOPs (no recompute) against the
// device's dense peak in the compute dtype; HFU counts recompute too.
func StepTime(prog *core.Program, plan *core.Plan, r *replay.Replay) (replay.TimeEstimate, *StageTime) {
	w, err := workOf(prog, plan, r)
	if err != nil {
		return replay.TimeEstimate{Notes: []string{"time model: " + err.Error()}}, nil
	}
	gt := w.Times(plan)
	step := float64(w.M)*gt.MbSec + gt.TlSec
	te := replay.TimeEstimate{StepSeconds: step}
	for _, s := range gt.PerMB {
		te.Breakdown = append(te.Breakdown, replay.TimeShare{Name: s.Name, Seconds: float64(w.M) * s.Seconds})
	}
	te.Breakdown = append(te.Breakdown, gt.Tail...)
	var stage *StageTime
	if plan.PipeStage != nil {
		stage = &StageTime{Work: w, Time: gt}
	}
	w.Utilisation(plan, &te, 1)
	return te, stage
}

// utilisation fills MFU, HFU and tokens/s of te from w's per-micro-batch
// FLOPs; stages is the number of pipeline stages sharing the step (the
// FLOPs of all of them are counted, and their GPUs).
func (w *GpuWork) Utilisation(plan *core.Plan, te *replay.TimeEstimate, stages int64) {
	step := te.StepSeconds
	if step <= 0 {
		return
	}
	peak := peakFLOPS(plan.Device, plan.Precision.Compute)
	te.MFU = float64(w.M) * w.Flops / (float64(stages) * step * peak)
	te.HFU = float64(w.M) * w.HwFlops / (float64(stages) * step * peak)
	te.TokensPerS = w.Tokens / step
}

// workOf gathers the time model's inputs from a replayed program.
func workOf(prog *core.Program, plan *core.Plan, r *replay.Replay) (*GpuWork, error) {
	d := plan.Device
	par := plan.Parallel.Norm()
	w := &GpuWork{M: max(plan.GradAccum, 1), Eval: plan.Phase == core.Eval}
	mbProg, redone := prog, r.Redone
	w.Flops, w.HwFlops = r.Rep.FLOPs.Model, r.Rep.FLOPs.Hardware
	if st := plan.PipeStage; st != nil {
		w.M = plan.MicroBatches()
		p, err := stageMicroBatch(plan) // one copy of each chunk
		if err != nil {
			return nil, err
		}
		mbProg, redone = p, allRedone(p, w.Eval)
		w.Flops, w.HwFlops = ProgramFLOPs(p, w.Eval)
		w.PpRecv, w.PpSend = StageTransfers(par, st.Stage)
	}
	optBytes := r.Rep.Traffic.HBM
	if r.Dist != nil {
		w.Mode, w.Zero = r.Dist.Mode, par.Zero
		optBytes = shardedOptimizerTraffic(r)
		for _, c := range r.Dist.CommPerStep() {
			if c.Group == "dp" || c.Group == "edp" {
				w.DpComm = append(w.DpComm, c)
			}
		}
	}
	ct, attn := computeTime(mbProg, d, redone, optBytes)
	w.Mb, w.Attn, w.Optimizer = ct, attn, ct.Optimizer
	w.MbComm = SumComm(mbProg.Comm, nil, 1)
	if w.Eval {
		w.Mb.Backward, w.Mb.Recompute, w.Optimizer = 0, 0, 0
		w.HwFlops = w.Flops // forward only: nothing recomputed
	}
	w.host = hostSeconds(r)
	w.Tokens = float64(plan.Batch*plan.Seq*max(plan.Members, 1)) * float64(w.M) * float64(par.DP)
	return w, nil
}

// allRedone marks every checkpoint region as recomputed: a training
// step's backward reaches every op, and the first op of a region it
// reaches re-runs the region's forward (replay/replay.go backwardOp).
func allRedone(p *core.Program, eval bool) []bool {
	out := make([]bool, len(p.Regions))
	for i := range out {
		out[i] = !eval
	}
	return out
}

// programFLOPs is the model and hardware FLOPs of one pass of p, as the
// replay counts them: forward + backward = 3 x forward, plus the forward
// of recomputed regions.
func ProgramFLOPs(p *core.Program, eval bool) (model, hardware float64) {
	var fwd, rec float64
	for i := range p.Ops {
		fwd += p.Ops[i].Flops
		if p.Ops[i].Region != 0 && !eval {
			rec += p.Ops[i].Flops
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
func shardedOptimizerTraffic(r *replay.Replay) int64 {
	d := r.Dist
	if d.ZeroOffload(r) || d.FsdpOffload(r) {
		return 0 // the step runs on the host; its PCIe traffic is timed as offload
	}
	sharded := d.Mode == replay.DistZeRO || d.Mode == replay.DistFSDP || (d.Mode == replay.DistMegatron && d.Par.DistributedOptimizer)
	var t int64
	for pi := range r.P.Params {
		p := &r.P.Params[pi]
		if p.TiedTo >= 0 || !p.Trainable {
			continue
		}
		b := r.OptimizerTraffic(p)
		if sharded {
			b /= d.Degree(int32(pi))
		}
		t += b
	}
	return t
}

// times splits the work into exposed time by cause.
func (w *GpuWork) Times(plan *core.Plan) gpuTime {
	g := gpuTime{PerMB: make([]replay.TimeShare, 0, 8), Tail: make([]replay.TimeShare, 0, 3)}
	add := func(list *[]replay.TimeShare, name string, s float64) {
		*list = append(*list, replay.TimeShare{Name: name, Seconds: s})
	}
	mb := w.Mb
	add(&g.PerMB, "forward", mb.Forward)
	add(&g.PerMB, "backward", mb.Backward)
	add(&g.PerMB, "recompute", mb.Recompute)
	c := w.exposedComm(plan)
	for _, s := range c.perMB {
		add(&g.PerMB, s.Name, s.Seconds)
	}
	for _, s := range c.tail {
		add(&g.Tail, s.Name, s.Seconds)
	}
	add(&g.Tail, "optimizer", w.Optimizer)
	add(&g.Tail, "offload", w.host)
	for _, s := range g.PerMB {
		g.MbSec += s.Seconds
	}
	for _, s := range g.Tail {
		g.TlSec += s.Seconds
	}
	return g
}
