package timing

import (
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// The compute part of the time model: every op of the replayed program
// priced from its shape (ops.go, kernels.go, graph.go), its kernels'
// CPU dispatch (dispatch.go), and the optimizer step (optimizer.go).
// Communication, pipeline bubbles and host transfers are added by their
// own models (comm, pipeline, offload) on top of these figures.

// ComputeTime is the compute-time estimate of one micro-batch: GPU time
// and CPU dispatch time of each phase.
type ComputeTime struct {
	Forward, Backward, Recompute, Optimizer float64 // GPU seconds
	ForwardCPU, BackwardCPU, RecomputeCPU   float64 // CPU dispatch seconds
	// Synced is the forward replayed on two clocks, split at its host
	// syncs (host_sync.go), Syncs their number with those recomputed, and
	// SyncRec the recomputed ones' latency: HostSync() is what they add.
	Synced, Syncs, SyncRec float64
}

// Plus is t + k*u.
func (t ComputeTime) Plus(u ComputeTime, k float64) ComputeTime {
	t.Forward += k * u.Forward
	t.Backward += k * u.Backward
	t.Recompute += k * u.Recompute
	t.Optimizer += k * u.Optimizer
	t.ForwardCPU += k * u.ForwardCPU
	t.BackwardCPU += k * u.BackwardCPU
	t.RecomputeCPU += k * u.RecomputeCPU
	t.Synced += k * u.Synced
	t.Syncs += k * u.Syncs
	t.SyncRec += k * u.SyncRec
	return t
}

// Launch is the time the CPU's dispatch adds beyond the GPU's work: the
// forward, and the backward with its recompute, each take the larger of
// the two (dispatch.go).
func (t ComputeTime) Launch() float64 {
	return max(0, t.ForwardCPU-t.Forward) + max(0, t.BackwardCPU+t.RecomputeCPU-t.Backward-t.Recompute)
}

// computeTime prices the program in prices' lists (nil: lists of its
// own): forward, backward, the recompute of checkpointed regions, and
// the per-op costs. attn is the attention
// kernels' share of forward, backward and recompute (context parallelism
// hides its ring exchange behind them).
func computeTime(prog *core.Program, plan *core.Plan, recomputed []bool, prices *Prices) (t ComputeTime, attn float64, costs []OpCost) {
	if prices == nil {
		prices = &Prices{}
	}
	costs = prices.Of(prog, plan)
	for i := range costs {
		c := &costs[i]
		t.Forward += c.Fwd
		t.ForwardCPU += c.FwdCPU
		t.Backward += c.Bwd
		t.BackwardCPU += c.BwdCPU
		if c.Attention {
			attn += c.Fwd + c.Bwd
		}
	}
	for id, done := range recomputed {
		if !done {
			continue
		}
		reg, end := prog.Regions[id], prog.RecomputeEnd(int32(id+1)) // its early stop
		for j := reg.First; j < end; j++ {
			if prog.Ops[j].Keep { // a checkpoint policy kept its outputs: not run again
				continue
			}
			t.Recompute += costs[j].Fwd
			t.RecomputeCPU += costs[j].FwdCPU
			if costs[j].Attention {
				attn += costs[j].Fwd
			}
		}
	}
	SyncsOf(&t, prog, costs, func(i int) bool {
		op := &prog.Ops[i]
		return op.Region != 0 && int(op.Region) <= len(recomputed) && recomputed[op.Region-1] && !op.Keep &&
			int32(i) < prog.RecomputeEnd(op.Region) // only ops with syncs ask
	})
	return t, attn, costs
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
	scratch        *timingScratch    // the prices' and moduleRows' lists (the ProgramBuffers' workOf was given; nil: their own)
	PpSend, PpRecv int64             // activations sent and received per micro-batch and direction
	DpComm         []core.CommRecord // data-parallel collectives of the step (comm.go's inventory)
	Mode           replay.DistMode
	Zero           int
	Optimizer      float64 // the optimizer step's GPU time, seconds
	OptimizerCPU   float64 // its CPU dispatch time, seconds
	StepOverhead   float64 // the step's time outside the GPU (core.Overheads.StepSeconds)
	CPUOptimizer   float64 // the optimizer step on the host (ZeRO-Offload's, cpu_optimizer.go; torch's under FSDP offload, torch_cpu_optimizer.go), seconds
	NVMe           float64 // ZeRO-Infinity's NVMe reads and writes (nvme.go), seconds
	host           float64 // offload transfers and host-placed tables, seconds (torchtune's activation copies overlapped: offload.go)
	// gradCopy is ZeRO-Offload's fp32 gradient copies to the host at
	// stages 1-2 with overlap_comm, seconds: on the reduction stream
	// behind the boundary's backward (comm.go), not in host; gradCopyLast
	// is the last bucket's. accCopy and accCopyLast are one copy of the
	// 16-bit partition (and of its last bucket) that accumulates
	// gradients on the host over micro-steps (replay.AccumulateCopiesAt
	// says how many each micro-step issues), on the same stream.
	gradCopy, gradCopyLast float64
	accCopy, accCopyLast   float64
	// fsdpDown and fsdpUp are FSDP's CPU offload copies per step, seconds:
	// the shards to the GPU before their gathers (and ZeRO-3
	// offload_param's partitions) and the gradient shards to the host
	// after their reduce-scatters, on side streams beside the collectives
	// (comm.go), not in host.
	fsdpDown, fsdpUp float64
	// ShardEdges are FSDP's collectives a micro-batch that nothing overlaps
	// (the root unit's gather and reduce-scatter, DPO's reference copy's
	// gather: replay.ShardEdges), bytes.
	ShardEdges replay.ShardEdges
	// nvmeParamRead is ZeRO-Infinity's parameter partitions read from NVMe
	// before their gathers, seconds per step, prefetched in the same chain
	// (nvme.go); the serial rest of the NVMe time is NVMe.
	nvmeParamRead float64

	costs  []OpCost      // the priced ops of one micro-batch (workOf; nil on the search's path)
	prog   *core.Program // their program
	redone []bool        // its recomputed checkpoint regions
	Tokens float64       // tokens per step over all data-parallel replicas
	Eval   bool
	notes  []string // what the time model leaves out of this work, for the estimate's notes
}

// gpuTime is one GPU's step split by cause: the per-micro-batch part
// (perMB, paid m times, or once per micro-batch slot of a pipeline) and
// the once-per-step tail.
type gpuTime struct {
	PerMB []replay.TimeShare // forward, backward, recompute, exposed tp/cp/ep/pp/fsdp communication
	Tail  []replay.TimeShare // exposed data-parallel communication, optimizer, cpu_optimizer, offload
	MbSec float64
	TlSec float64
	// BwdRec is the backward and recompute of the micro-batch (the
	// pipeline's dualpipe bubble reads it): 0 + backward + recompute.
	BwdRec float64
}

// stepTime turns the replay's figures into a step-time estimate for one
// GPU: m micro-batches of forward, backward, recompute and exposed
// communication, then the data-parallel reduction's exposed part, the
// optimizer step and host transfers. A pipeline stage's estimate is its
// own; the pipeline's step (bubble included) is composed over the stages
// by pipelineTime. MFU counts model FLOPs (no recompute; a frozen
// weight's gradient not counted: core/model_flops.go) against the
// device's dense peak in the compute dtype; HFU counts recompute too.
func StepTime(prog *core.Program, plan *core.Plan, r *replay.Replay) (replay.TimeEstimate, *StageTime) {
	return StepTimeIn(prog, plan, r, nil)
}

// StepTimeIn is StepTime lowering a pipeline stage's micro-batch program
// (stageMicroBatch) into bufs' lists, and handing them back once its
// figures are taken (nil: lists of its own, as StepTime): the same
// program (core.Plan.LowerProgramInto), names kept in bufs' table. A
// search replays hundreds of stages, each lowering one (5 % of
// BenchmarkSearchLlama70B1024's bytes in lists and names made afresh).
func StepTimeIn(prog *core.Program, plan *core.Plan, r *replay.Replay, bufs *core.ProgramBuffers) (replay.TimeEstimate, *StageTime) {
	w, err := workOf(prog, plan, r, bufs)
	if err != nil {
		return replay.TimeEstimate{Notes: []string{"time model: " + err.Error()}}, nil
	}
	mb := w.prog // a stage's micro-batch program, or prog
	gt := w.Times(plan)
	step := float64(w.M)*gt.MbSec + gt.TlSec
	te := replay.TimeEstimate{StepSeconds: step, Notes: w.notes}
	for _, s := range gt.PerMB {
		te.Breakdown = append(te.Breakdown, replay.TimeShare{Name: s.Name, Seconds: float64(w.M) * s.Seconds})
	}
	te.Breakdown = append(te.Breakdown, gt.Tail...)
	mbRows, ok := microBatchRows(w, gt.PerMB, float64(w.M))
	if ok { // moduleRows(w, gt, w.M), mbRows left as they are for summarise
		te.Modules = appendTail(slices.Clip(mbRows), gt.Tail)
	}
	var stage *StageTime
	if plan.PipeStage != nil {
		stage = &StageTime{Work: w, Time: gt}
		stage.summarise(plan.Parallel.Norm(), mbRows)
	}
	w.Utilisation(plan, &te, 1)
	if mb != prog && stage != nil { // summarise dropped it: nothing returned reads it
		bufs.Recycle(mb)
	}
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
	peak := peakFLOPS(&plan.Device, plan.Precision.Compute)
	te.MFU = float64(w.M) * w.Flops / (float64(stages) * step * peak)
	te.HFU = float64(w.M) * w.HwFlops / (float64(stages) * step * peak)
	te.TokensPerS = w.Tokens / step
}

// SetHost sets the host transfers the step waits for, seconds: what
// workOf reads from a replay (hostSeconds), for the search's fast path,
// which has none (ZeRO-Offload's PCIe copies).
func (w *GpuWork) SetHost(seconds float64) { w.host = seconds }

// SetZeROOffloadCopies moves the copies of ZeRO-Offload's partition of
// n elements per rank at stages 1-2 (the fp32 gradients at the boundary,
// the 16-bit accumulation copies of each micro-step:
// replay/shard_offload.go) out of the exposed host transfers and onto
// DeepSpeed's reduction stream when parallel(overlap_comm=True) puts
// them there; comm.go prices what of that stream outlasts each
// micro-step's backward. Read at DeepSpeed edaa722,
// deepspeed/runtime/zero/stage_1_and_2.py: reduce_ipg_grads (1691-1756)
// issues copy_grads_in_partition under
// get_accelerator().stream(self.reduction_stream) when overlap_comm
// (1719-1729), and copy_grads_in_partition (1650-1666) runs both
// async_accumulate_grad_in_cpu_via_gpu (its host-to-GPU copy, the add
// and the copy back, all non_blocking: 1516-1560) and the boundary's
// async_inplace_copy_grad_to_fp32_buffer_from_gpu (1590-1605) there, after
// the bucket's reduction; without overlap_comm the same calls run on the
// compute stream (1721-1727): exposed. Pinned host buffers assumed
// (offload_optimizer.pin_memory, DeepSpeed's default from 0.19.5). The
// caller has set the host transfers (workOf, or SetHost) and w.Eval.
func (w *GpuWork) SetZeROOffloadCopies(plan *core.Plan, n int64) {
	if w.Eval || !plan.Parallel.OverlapComm || w.Mode != replay.DistZeRO || w.Zero < 1 || w.Zero > 2 || n <= 0 {
		return
	}
	par := plan.Parallel.Norm()
	d := plan.Device
	last := min(n, (plan.ZeroSizes().ReduceBucket+par.DP*par.CP-1)/(par.DP*par.CP)) // this rank's share of the last bucket
	w.gradCopy = PCIeSeconds(d, units.FP32.Bytes(n))
	w.gradCopyLast = PCIeSeconds(d, units.FP32.Bytes(last))
	w.accCopy = PCIeSeconds(d, plan.Precision.Params.Bytes(n))
	w.accCopyLast = PCIeSeconds(d, plan.Precision.Params.Bytes(last))
	w.host -= w.gradCopy + float64(replay.AccumulateCopies(plan, w.Zero))*w.accCopy
}

// DataParallelGroup reports whether a step's collective over group is
// one of the data-parallel reductions and gathers the time model prices
// as dp_comm or fsdp_comm: over dp, the experts' data-parallel group
// (edp) and HSDP's replicas (dp_replicate: the sharded gradients'
// all-reduce across the shard groups, replay's stepComm). workOf and the
// search's fast path both read it.
func DataParallelGroup(group string) bool {
	return group == "dp" || group == "edp" || group == "dp_replicate"
}

// workOf gathers the time model's inputs from a replayed program.
// A pipeline stage's micro-batch program is lowered into bufs' lists
// (nil: lists of its own).
func workOf(prog *core.Program, plan *core.Plan, r *replay.Replay, bufs *core.ProgramBuffers) (*GpuWork, error) {
	par := plan.Parallel.Norm()
	w := &GpuWork{M: max(plan.GradAccum, 1), Eval: plan.Phase == core.Eval}
	if bufs != nil {
		w.scratch = scratchOf(bufs)
	}
	mbProg, redone := prog, r.Redone
	w.Flops, w.HwFlops = r.Rep.FLOPs.Model, r.Rep.FLOPs.Hardware
	if st := plan.PipeStage; st != nil {
		w.M = plan.MicroBatches()
		p, err := stageMicroBatch(plan, prog, bufs) // one copy of each chunk
		if err != nil {
			return nil, err
		}
		mbProg, redone = p, allRedone(p, w.Eval)
		w.Flops, w.HwFlops = ProgramFLOPs(p, w.Eval)
		w.PpRecv, w.PpSend = StageTransfers(par, st.Stage)
	}
	ow := OptimizerWorkOf(r)
	if r.Dist != nil {
		w.Mode, w.Zero = r.Dist.Mode, par.Zero
		w.ShardEdges = r.Dist.ShardEdges()
		for c := range r.Dist.CommPerStep() {
			if DataParallelGroup(c.Group) {
				w.DpComm = append(w.DpComm, c)
			}
		}
	}
	var prices *Prices
	if w.scratch != nil {
		prices = &w.scratch.prices // read until StepTimeIn returns (summarise drops them)
	}
	ct, attn, costs := computeTime(mbProg, plan, redone, prices)
	w.Mb, w.Attn, w.costs, w.prog, w.redone = ct, attn, costs, mbProg, redone
	if _, _, note := trainMetricsTime(mbProg, plan); note != "" { // their time is in the loss's forward (Prices.Of)
		w.notes = append(w.notes, note)
	}
	w.Optimizer, w.OptimizerCPU = OptimizerTime(plan, ow)
	w.StepOverhead = plan.Overheads.StepSeconds
	if prices != nil {
		w.MbComm = prices.SumCommOf(mbProg, plan, costs) // in the scratch's lists, the sums a list of their own
	} else {
		w.MbComm = SumCommOf(mbProg, plan, costs)
	}
	if w.Eval {
		w.Mb.Backward, w.Mb.Recompute, w.Optimizer, w.OptimizerCPU = 0, 0, 0, 0
		w.Mb.BackwardCPU, w.Mb.RecomputeCPU = 0, 0
		w.HwFlops = w.Flops // forward only: nothing recomputed
	}
	w.host = hostSeconds(r)
	if down, up := r.Dist.FsdpOffloadPCIe(); down+up > 0 { // nil-safe
		w.fsdpDown, w.fsdpUp = PCIeSeconds(plan.Device, down), PCIeSeconds(plan.Device, up)
		w.host = max(0, w.host-w.fsdpDown-w.fsdpUp) // hostSeconds counted them: linear in the bytes, so only rounding is clamped
	}
	if b := r.Dist.PageableD2H(); b > 0 { // nil-safe; hostSeconds priced them pinned
		w.host += PageableD2HSeconds(plan.Device, b) - PCIeSeconds(plan.Device, b) + StagedCastSeconds(plan, b, RanksPerHost(plan))
	}
	if r.Dist != nil && r.Dist.ZeroOffload(r) {
		w.SetZeROOffloadCopies(plan, int64(hostStepElements(r)))
	}
	if !w.Eval {
		w.CPUOptimizer = CPUOptimizerSeconds(plan, hostStepElements(r), RanksPerHost(plan)) +
			TorchCPUOptimizerSeconds(plan, float64(r.Dist.FsdpHostStepElements(r)), RanksPerHost(plan))
	}
	w.NVMe = NVMeSeconds(plan, r.NVMe(), RanksPerHost(plan))
	w.nvmeParamRead = NVMeParamReadSeconds(plan, r.NVMe(), RanksPerHost(plan))
	w.NVMe -= w.nvmeParamRead  // in the gathers' chain (exposedComm)
	if plan.PipeStage == nil { // mbProg is the replayed program
		if exp, ok := offloadExposed(r, costs, plan.Offload == nil || !plan.Offload.SyncCopies); ok { // torchtune's copies overlap (offload.go)
			d := r.Plan.Device
			w.host += float64(w.M)*exp - float64(r.OffloadedPCIe())/(d.PCIeGBps*d.Rates().PCIe*1e9)
		}
	}
	w.Tokens = StepTokens(plan, w.M, par.DP)
	return w, nil
}

// StepTokens is the tokens one optimizer step processes on the whole job:
// a GPU's micro-batch (its members' copies) passes times over dp
// data-parallel ranks; the search's estimate counts it the same way.
func StepTokens(plan *core.Plan, passes, dp int64) float64 {
	return float64(plan.Batch*plan.Seq*membersPerGPU(plan)*plan.Preference.Rows()) * float64(passes) * float64(dp)
}

// membersPerGPU is the ensemble members one GPU's batch runs: all of them
// stacked or one at a time, one under "spread", where each of the members'
// GPU groups runs one and dp counts the groups (core/members.go). Counting
// every member on every group counted each input state's members members
// times over (anemoi's DDPEnsGroupStrategy: an ensemble of 4 members on 4
// groups reads one input state, not 4).
func membersPerGPU(plan *core.Plan) int64 {
	if plan.MembersMode == "spread" {
		return 1
	}
	return max(plan.Members, 1)
}

// allRedone marks every checkpoint region as recomputed: a training
// step's backward reaches every op, and the first op of a region it
// reaches re-runs the region's forward (replay/replay.go backwardOp).
func allRedone(p *core.Program, eval bool) []bool {
	out := make([]bool, len(p.Regions))
	for i := range out {
		out[i] = !eval && !p.Regions[i].Offload // an offloaded region saves to the host instead
	}
	return out
}

// programFLOPs is the model and hardware FLOPs of one pass of p, as the
// replay counts them: the forward and the backward the step needs
// (core.Program.ModelFlops: 3 x forward with every weight trainable),
// plus the forward of recomputed regions.
func ProgramFLOPs(p *core.Program, eval bool) (model, hardware float64) {
	var fwd, rec float64
	for i := range p.Ops {
		fwd += p.Ops[i].Flops
	}
	if !eval {
		for k := range p.Regions { // as the replay counts them (core/model_flops.go)
			id := int32(k + 1)
			if reg := &p.Regions[k]; !reg.Offload {
				for j, end := reg.First, p.RecomputeEnd(id); j < end; j++ {
					if p.RecomputeKernel(id, j, end) {
						rec += p.Ops[j].Flops
					}
				}
			}
		}
	}
	if eval {
		return fwd, fwd
	}
	model = p.ModelFlops()
	return model, model + rec
}

// OptimizerWorkOf is the optimizer step's work on this GPU: its HBM
// traffic, tensors and elements. ZeRO, FSDP and Megatron's distributed
// optimizer update this rank's partition only (1/dp of every parameter,
// 1/(dp/ep) of expert parameters); DDP and Megatron without the
// distributed optimizer update every parameter. Offloaded steps run on
// the host (their PCIe traffic is timed as offload).
func OptimizerWorkOf(r *replay.Replay) OptimizerWork {
	if r.Plan.Phase == core.Eval {
		return OptimizerWork{}
	}
	d := r.Dist
	if d == nil {
		var w OptimizerWork
		w.Traffic = float64(r.Rep.Traffic.HBM)
		for pi := range r.P.Params {
			p := &r.P.Params[pi]
			if p.TiedTo >= 0 || !p.Trainable {
				continue
			}
			if o := r.Plan.Muon(); o.MuonMatrix(p) {
				b := float64(r.OptimizerTraffic(p))
				w.Traffic -= b
				if o.NS == core.MuonEmerging { // Megatron's on one GPU
					for _, pc := range o.MuonPieces(r.P.Params, []int32{int32(pi)}) {
						w.addMuonEmerging(r.Plan, p, pc.Shape, float64(r.MuonEmergingTraffic(p, pc.Shape)))
					}
					continue
				}
				w.addMuon(r.Plan, p, b)
			}
			w.Tensors++
			w.Elements += float64(p.Numel)
		}
		return w
	}
	if d.ZeroOffload(r) || d.FsdpOffload(r) {
		return OptimizerWork{}
	}
	sharded := d.Mode == replay.DistZeRO || d.Mode == replay.DistFSDP || (d.Mode == replay.DistMegatron && d.Par.DistributedOptimizer)
	var w OptimizerWork
	zero := d.Mode == replay.DistZeRO && !r.Plan.ZeroBF16Optimizer() // offloaded returned above
	for pi := range r.P.Params {
		p := &r.P.Params[pi]
		if p.TiedTo >= 0 || !p.Trainable {
			continue
		}
		if r.Plan.Muon().MuonMatrix(p) { // whole matrices: every one, or the layer-wise optimizer's own (below)
			if !r.Plan.Precision.Megatron {
				w.addMuon(r.Plan, p, float64(r.OptimizerTraffic(p)))
				w.Elements += float64(p.Numel)
				w.Tensors++
			}
			continue
		}
		b, n := float64(r.OptimizerTraffic(p)), float64(p.Numel)
		if sharded {
			deg := float64(d.Degree(int32(pi)))
			b, n = b/deg, n/deg
		}
		if zero {
			k := 0
			if replay.IsExpertRole(p.Role) {
				k = 1
			}
			w.Zero[k].Add(p.Numel, 1, d.Degree(int32(pi)))
		}
		w.Traffic += b
		w.Elements += n
		w.Tensors++
		if r.Plan.ZeroBF16Optimizer() {
			w.HPGrads += float64(p.Numel)
		}
	}
	if r.Plan.Precision.Megatron {
		for _, pc := range r.MuonSteppedPieces() { // Megatron's Muon (muon.go)
			p := &r.P.Params[pc.Param]
			w.addMuonEmerging(r.Plan, p, pc.Shape, float64(r.MuonEmergingTraffic(p, pc.Shape)))
		}
	}
	return w
}

// hostStepElements is the number of elements the optimizer steps on the
// host: with the optimizer (or the parameters) offloaded under ZeRO
// (core/offload.go refuses offload without zero= or fsdp=), every
// stepped element has its master there (replay/shard_offload.go
// offloadShard), so the host master's bytes count them. FSDP's CPU offload (FSDP2, FSDP1) steps
// on the host too, with torch's optimizer (torch_cpu_optimizer.go,
// replay's FsdpHostStepElements).
func hostStepElements(r *replay.Replay) float64 {
	o := r.Plan.Offload
	if o == nil || (o.Optimizer == "" && o.Params == "") {
		return 0
	}
	if !r.Dist.ZeroOffload(r) { // nil-safe
		return 0
	}
	return float64(r.Rep.States.Master) / float64(r.Plan.Precision.ZeroMaster().Bytes(1))
}

// Times splits the work into exposed time by cause: its rows (PerMB,
// Tail) and their sums.
func (w *GpuWork) Times(plan *core.Plan) gpuTime { return w.times(plan, true) }

// Sums is Times without the rows: MbSec, TlSec and BwdRec only, summed
// in Times' order (the same bits), for a caller that ranks by the step
// time alone (the search prices thousands of layouts and shows none of
// their rows).
func (w *GpuWork) Sums(plan *core.Plan) gpuTime { return w.times(plan, false) }

// times prices the work by cause (one source for Times and Sums), each
// term added to its sum in the order of the rows, which are built only
// when asked for.
func (w *GpuWork) times(plan *core.Plan, rows bool) gpuTime {
	var g gpuTime
	if rows {
		g.PerMB, g.Tail = make([]replay.TimeShare, 0, 9), make([]replay.TimeShare, 0, 5)
	}
	perMB := func(name string, s float64) {
		g.MbSec += s
		if rows {
			g.PerMB = append(g.PerMB, replay.TimeShare{Name: name, Seconds: s})
		}
	}
	tail := func(name string, s float64) {
		g.TlSec += s
		if rows {
			g.Tail = append(g.Tail, replay.TimeShare{Name: name, Seconds: s})
		}
	}
	mb := w.Mb
	perMB("forward", mb.Forward)
	perMB("backward", mb.Backward)
	perMB("recompute", mb.Recompute)
	g.BwdRec += mb.Backward // as share("backward", "recompute") summed the rows
	g.BwdRec += mb.Recompute
	perMB("launch", mb.Launch())
	perMB("host_sync", mb.HostSync()) // 0 where the program makes no syncs (host_sync.go)
	c := w.exposedComm(plan)
	for _, s := range c.perMB {
		perMB(s.Name, s.Seconds)
	}
	for _, s := range c.tail {
		tail(s.Name, s.Seconds)
	}
	tail("optimizer", max(w.Optimizer, w.OptimizerCPU))
	tail("cpu_optimizer", w.CPUOptimizer)
	tail("nvme", w.NVMe+c.nvmeReads)
	tail("offload", w.host+c.gradCopy+c.fsdpCopies)
	tail("step_overhead", w.StepOverhead)
	return g
}
