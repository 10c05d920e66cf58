package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// The first step, before the steady one (what nvidia-smi holds).
//
// PyTorch's optimizers make their state lazily: torch.optim's AdamW
// (torch/optim/adam.py _init_group: torch.zeros_like per moment, inside
// step()), Transformer Engine's FusedAdam (Megatron-Core's Adam when TE is
// installed, megatron/core/optimizer/__init__.py at core_v0.12.0) and
// apex's (transformer_engine/pytorch/optimizers/fused_adam.py step:
// "if len(state) == 0: self.initialize_state(p, ...)") all initialize a
// parameter's state inside step() when it has none. A run that loads no
// optimizer checkpoint (Megatron's --finetune, a transformers script)
// loads none, so the first step's forward and backward run without them,
// and the state is made at its end from the cache the step's activations
// left. From the second step on those cached blocks are taken: what the
// activations need again comes from new segments. The caching allocator
// returns cached segments only when a request fails (or on empty_cache),
// so max_memory_reserved and nvidia-smi keep the first step's reserve
// plus whatever the second step adds (the replay reports the most
// reserved over both; the allocated figures are the steady step's).
// Measured on one H200 (sim/testdata/cuda_h200/hf.jsonl,
// tools/oracle/cuda_hf.py): the steady step of a transformers model
// reserves 3-13 % more than its first step's cache layout alone gives.
//
// warmFirstStep replays that first step and carries its allocator into
// r, the steady step's replay, which then skips setup()'s allocations.
// It applies to a Megatron layout (the distributed optimizer or
// precision "megatron") and to FSDP2 (distState.warms), whose setups
// leave the moments pending (Replay.lazy), and to one GPU, whose first
// step is the one first_step=True replays (its state made by
// firstStepStates, the backward thread's cuBLAS workspace at its first
// matmul). The allocator is carried whole, so each stream's segments stay
// in its pool: FSDP2's reduce-scatter stream's sharded gradients, freed at
// zero_grad, leave their segments to the second step's. It reports
// whether it did; plans it does not apply to (evaluation, other
// data-parallel layouts, offload, paged or in-backward optimizers, table
// models, a validation pass, CUDA graphs, a torch.distributed.pipelining
// stage, whose receive buffers setup() keeps apart) replay as before. A
// trace (Options.Trace) holds both steps.
func warmFirstStep(r *Replay, mk func() (*Replay, error)) (bool, error) {
	plan := r.Plan
	single := r.Dist == nil
	if (!single && !r.Dist.warms()) || plan.Phase == core.Eval || plan.FirstStep ||
		plan.Offload != nil || plan.Optimizer.Paged() || plan.Optimizer.InBackward ||
		len(r.P.Tables) > 0 || r.valProg != nil || r.graphs != nil || torchStage(r.P) {
		return false, nil
	}
	first, err := mk()
	if err != nil {
		return false, err
	}
	if single { // the step first_step=True replays
		fp := *plan
		fp.FirstStep = true
		first.Plan = &fp
	}
	first.lazy = true
	first.setup()
	persist := first.batchAt // everything before the batch persists
	// What setup() reports: the states and the update's HBM traffic
	// (the step adds its gradients to the states).
	states, traffic := first.Rep.States, first.Rep.Traffic
	// Of the step itself r takes only the most reserved and whether it
	// ran out of memory (and a trace whole): its other peaks go unkept.
	if first.quiet = first.traced == nil; first.quiet {
		first.alloc.Grew = nil // no reserve growth to explain (r sets its own)
	}
	first.forward()
	first.backward()
	if err := r.opts.Stopped(); err != nil { // the caller's context
		return false, err
	}
	first.dropHeldBackward() // the loop's out.logits go before step(), as in the steady step (run.go)
	first.optimizerStep()
	first.finish()
	if first.Rep.OOM != nil { // the steady step alone says where it fails
		first.Recycle()
		return false, nil
	}
	// zero_grad and the end of the step: everything made after the batch
	// is dropped but what the step made to keep (lazyIDs: the moments,
	// made one after another by optimizerStep, and the workspaces made
	// before them, so in increasing order).
	for pi, id := range first.paramGrad {
		if id != none {
			first.release(id)
			first.paramGrad[pi] = none
		}
	}
	moments := first.lazyIDs
	for id := persist; id < first.live.len(); id++ {
		if len(moments) > 0 && moments[0] == id {
			moments = moments[1:]
			continue
		}
		first.release(id)
	}
	unused := r.alloc.Slabs() // r has made no request: the slabs it was given go back with first's lists
	r.alloc = first.alloc
	first.alloc = alloc.Allocator{} // r's now: first's must not hand its slabs on
	first.alloc.Reuse(unused)
	r.alloc.Grew = func(g alloc.Growth) { r.growth, r.grew = g, true }
	if r.traced != nil {
		r.traced, r.Rep.Trace = first.traced, first.Rep.Trace
		r.Rep.Trace.Steady = len(r.Rep.Trace.Events)
		r.alloc.Observe = r.traceSegment
	}
	// torch.cuda.empty_cache() and reset_peak_memory_stats() at the
	// steady step's start: the first step's reserve counts no more.
	peakReserved := first.Rep.PeakReserved
	if plan.EmptyCache {
		r.phase, r.op = PhaseSetup, "torch.cuda.empty_cache"
		r.alloc.EmptyCache()
		peakReserved = r.alloc.Reserved
	}
	// first ends here: its chunks become r's. What it kept has ids past
	// persist, in increasing order: still first's tensors (takeFirst).
	spare := r.live // r has made no tensor: its chunks (a Scratch's) go back with first's lists
	r.live.takeFirst(&first.live, persist)
	first.live = spare
	for _, id := range first.lazyIDs {
		r.live.add(*r.live.at(id))
	}
	for id := range r.live.len() {
		if t := r.live.at(id); t.blk != 0 {
			r.cur[t.cat] += r.alloc.Block(t.blk).Size
		}
	}
	// What setup() reports, and its timeline.
	r.Rep.States, r.Rep.Traffic = states, traffic
	r.Rep.PeakReserved = peakReserved
	r.Rep.Largest = first.setupLargest
	if r.opts.Timeline {
		r.Rep.Timeline = append(r.Rep.Timeline, first.Rep.Timeline[:first.setupPoints]...)
	}
	r.backwardBlas, r.sideBlas = first.backwardBlas, first.sideBlas // made and kept
	if r.Dist != nil {
		r.Dist.seedHolds(r)
	}
	r.sample()
	r.setupStep()
	first.Recycle() // its tensors' chunks are r's (takeFirst), its allocator too
	return true, nil
}

// makePending makes the pending optimizer states, as the first step()
// does before its update.
func (r *Replay) makePending() {
	for _, a := range r.pending {
		a.Why += ", created by the first optimizer.step()"
		r.lazyIDs = append(r.lazyIDs, r.allocate(a))
	}
	r.pending = nil
}

// torchStage reports whether p is a stage of torch.distributed.pipelining
// with buffers setup() makes (replay/pipeline_torch.go).
func torchStage(p *core.Program) bool {
	st := p.Stage
	return st != nil && (len(st.Buffers) > 0 || len(st.HeldGrads) > 0)
}

// warms reports whether a data-parallel layout replays its first step
// before the steady one (warmFirstStep): Megatron's, and FSDP2's where
// nothing of the step lives before it but the shards and their state.
// Left out: FSDP1 (its flat parameters' record_stream frees and rate
// limiter not checked across two steps), and FSDP2 whose sharded or
// unsharded gradients exist before the step (gradient accumulation,
// no_sync, keep_grads, a pipeline stage's held units), which r's fresh
// distState would not know of; and FSDP2 with empty_cache, whose
// reduce-scatter blocks, freed with stream uses pending, the measured
// empty_cache left cached (sim/fsdp_h200_test.go: the 17 segments one
// batch's run left to the next), which EmptyCache here would release.
func (d *distState) warms() bool {
	switch d.Mode {
	case DistMegatron:
		return true
	case DistFSDP:
		return !d.fsdp1 && !d.noSync && !d.pipeHold && !d.plan.GradsPersist() && !d.plan.EmptyCache
	}
	return false
}
