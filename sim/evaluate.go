package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// Evaluate replays one steady-state step of the plan on one GPU: it
// validates the plan, lowers it (or replays each pipeline stage), replays
// the program through the allocator model, runs the time model over the
// replay and adds a graph model's notes.
func Evaluate(plan *core.Plan, opts core.Options) (*replay.Report, error) {
	rep, _, err := evaluate(plan, opts)
	return rep, err
}

// evaluate is Evaluate that also returns a pipeline stage's time, which
// evaluatePipeline composes into the pipeline's step.
func evaluate(plan *core.Plan, opts core.Options) (*replay.Report, *timing.StageTime, error) {
	if opts.Buffers == nil {
		return evaluateUnder(plan, opts, math.MaxInt64, nil)
	}
	bufs := opts.Buffers.Get(opts.Names) // the program goes back to them after its replay
	defer opts.Buffers.Put(bufs)
	return evaluateUnder(plan, opts, math.MaxInt64, bufs)
}

// evaluateUnder is evaluate for a caller that needs the report only when
// the GPU uses less than limit bytes of device memory (a pipeline stage
// of EvaluateBelow): once the replay shows at least that much, it returns
// a nil report, without the time model. Neither the time model nor
// Settle changes the device memory, except a paged optimizer's Settle,
// which may page state out (replay/paging.go): such a replay is always
// finished. The plan's program is lowered into bufs' lists and handed
// back to bufs after its replay (nil: lists of its own): nothing the
// caller gets reads it (a stage's time keeps a summary of its own
// program, timing.StageTime).
func evaluateUnder(plan *core.Plan, opts core.Options, limit int64, bufs *core.ProgramBuffers) (*replay.Report, *timing.StageTime, error) {
	rep, stage, prog, err := evaluateInto(plan, nil, opts, limit, bufs)
	bufs.Recycle(prog)
	return rep, stage, err
}

// evaluateLowered is evaluateUnder that replays prog as the plan's
// program when prog is not nil, instead of lowering it again: the caller
// lowered it for a plan that lowers alike (FuzzSizes evaluates each plan
// twice, the second time with fields changed that no lowering reads). It
// returns the program it replayed; nil where the plan lowers programs of
// its own (a pipeline's stages, a checkpoint budget's candidates, PEFT's
// kbit preparation, DeepSpeed's precision rewrite), which ignore prog.
func evaluateLowered(plan *core.Plan, prog *core.Program, opts core.Options, limit int64) (*replay.Report, *timing.StageTime, *core.Program, error) {
	return evaluateInto(plan, prog, opts, limit, nil)
}

// evaluateInto is evaluateLowered that lowers the plan's program, when it
// does, into bufs' lists (core.Plan.LowerProgramInto; nil: lists of its
// own).
func evaluateInto(plan *core.Plan, prog *core.Program, opts core.Options, limit int64, bufs *core.ProgramBuffers) (*replay.Report, *timing.StageTime, *core.Program, error) {
	if err := plan.Validate(); err != nil {
		return nil, nil, nil, err
	}
	if plan.KbitPrep { // PEFT's prepare_model_for_kbit_training: the casts, input grads, checkpointing
		rep, stage, err := evaluate(plan.KbitPrepared(), opts)
		return rep, stage, nil, err
	}
	if c := plan.Checkpoint; c.Mode == "budget" && (!plan.Compile.On() || c.Budget.Bytes > 0) {
		// eager: the least recompute within the budget, per block;
		// compile: the partitioners' fraction that meets the bytes
		solve := solveBudget
		if plan.Compile.On() {
			solve = solveCompileBudget
		}
		q, notes, err := solve(plan, opts)
		if err != nil {
			return nil, nil, nil, err
		}
		rep, stage, err := evaluate(q, opts)
		if rep != nil {
			rep.Notes = append(notes, rep.Notes...)
		}
		return rep, stage, nil, err
	}
	if rep, ok, err := evaluatePipeline(plan, opts); ok { // one replay per stage
		return rep, nil, nil, err
	}
	if prog == nil {
		if bufs == nil && opts.Names != nil { // lists of its own, names kept in the caller's table
			bufs = &core.ProgramBuffers{Names: opts.Names}
		}
		var err error
		if prog, err = plan.LowerProgramUnder(core.ProgramSize{}, bufs, opts.Stopped); err != nil {
			return nil, nil, nil, err
		}
	}
	rep, stage, err := replayProgram(plan, prog, opts, limit, bufs)
	return rep, stage, prog, err
}

// scratchOf is the replay's lists kept with bufs (core.ProgramBuffers.Replay),
// made at the first replay; nil without bufs (lists of the replay's own).
func scratchOf(bufs *core.ProgramBuffers) *replay.Scratch {
	if bufs == nil {
		return nil
	}
	s, ok := bufs.Replay.(*replay.Scratch)
	if !ok {
		s = &replay.Scratch{}
		bufs.Replay = s
	}
	return s
}

// replayProgram is evaluateUnder past the lowering: it replays the plan's
// program through the allocator model, then the time model and notes.
// The replay's step state is made in the lists kept with bufs
// (scratchOf) and handed back to them once the report is complete (nil:
// lists of its own); a stage's micro-batch program is lowered into
// bufs.Aside.
func replayProgram(plan *core.Plan, prog *core.Program, opts core.Options, limit int64, bufs *core.ProgramBuffers) (*replay.Report, *timing.StageTime, error) {
	if err := plan.CheckFirstStep(prog); err != nil {
		return nil, nil, err
	}
	r, err := replay.RunBelowIn(prog, plan, opts, limit, scratchOf(bufs))
	if err != nil || r == nil { // nil: the step reaches limit
		return nil, nil, err
	}
	defer r.Recycle() // the report, the time and the stage's summary keep none of its lists
	rep := r.Report()
	if rep.DeviceUsed >= limit && !plan.Optimizer.Paged() {
		// Settle still runs for its error (the node's host memory); it
		// reads nothing of the time model's.
		if err := r.Settle(); err != nil {
			return nil, nil, err
		}
		return nil, nil, nil
	}
	var stage *timing.StageTime
	var mbBufs *core.ProgramBuffers // a stage's micro-batch program's lists (timing.StepTimeIn)
	switch {
	case plan.PipeStage == nil:
	case bufs != nil: // a pipeline's stages share bufs, pool or none (evaluateStages)
		if bufs.Aside == nil {
			bufs.Aside = &core.ProgramBuffers{}
		}
		mbBufs, bufs.Aside.Names = bufs.Aside, opts.Names
	case opts.Buffers != nil:
		mbBufs = opts.Buffers.Get(opts.Names)
		defer opts.Buffers.Put(mbBufs)
	}
	rep.Time, stage = timing.StepTimeIn(prog, plan, r, mbBufs)
	graph.Advise(plan, rep) // notes on a graph model's failure
	if len(prog.Float8Skipped) > 0 {
		rep.Notes = append(rep.Notes, "float8: linears with a dimension not divisible by 16 stay in high precision, as torchtitan's filter leaves them (torch._scaled_mm needs multiples of 16): "+
			strings.Join(prog.Float8Skipped, ", "))
	}
	if n := len(prog.QuantSkipped); n > 0 {
		blocks := "MoE blocks"
		if n == 1 {
			blocks = "MoE block"
		}
		tail := "transformers 4.x's per-expert nn.Linear loop is quantized"
		if prog.QuantSkippedAlways {
			tail = "Llama 4's are 3-D in every transformers release (moe(impl=\"dense_bmm\"))"
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("quant=%q replaces nn.Linear modules only: the experts of %d %s (%s) are 3-D parameters (transformers 5's experts; moe(impl=\"fused_loop\", \"grouped_mm\" or \"grouped\")) and stay in %s; %s; quant_experts=True quantizes transformers' grouped_mm and Llama 4's dense experts too, as Axolotl's quantize_moe_experts does",
			plan.Quant, n, blocks, quantSkippedNames(prog.QuantSkipped), plan.Precision.Params, tail))
	}
	if par := plan.Parallel; par.GradNormGroup && !par.DistributedOptimizer {
		rep.Notes = append(rep.Notes, "grad_norm_group=True adds nothing here: the group is the distributed optimizer's (Megatron-Core 0.14's INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP), and this layout has none (distributed_optimizer=True adds it)")
	}
	if plan.LigerKernels && !prog.LigerKernels {
		rep.Notes = append(rep.Notes, "liger_kernels=True: nothing here for Liger's layer kernels to replace (they replace RMSNorm and the SwiGLU MLP's silu(gate) * up; LayerNorm, other MLPs and attention run as before), so the step is the eager one")
	}
	if note := zeroPrecisionNote(plan); note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if note := preferenceNote(plan, prog); note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if rep.NCCLHeld > 0 {
		rep.Notes = append(rep.Notes, "NCCL record_stream (runtime "+plan.Runtime.Name+", PyTorch 2.7 and earlier): blocks of Megatron's all-to-alls, once freed, wait until the host next waits for the device, up to "+
			units.FormatBytes(rep.NCCLHeld)+" at once, so the cache grows; a job with TORCH_NCCL_AVOID_RECORD_STREAMS=1 is train(nccl_avoid_record_streams=True)")
	}
	if err := r.Settle(); err != nil {
		return nil, nil, err
	}
	return rep, stage, nil
}

// quantSkippedNames is the first two MoE blocks quant= did not reach and
// how many more.
func quantSkippedNames(paths []string) string {
	if len(paths) <= 2 {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s, %s and %d more", paths[0], paths[1], len(paths)-2)
}
