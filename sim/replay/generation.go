package replay

import (
	"github.com/memsh/memsh/sim/alloc"
)

// generationPass replays GRPO's generation phase (transformers' generate,
// vllm=None: core/generation.go) through r's allocator and report, once a
// step: after the weights and optimizer state exist and before the step's
// batch, with the gradients None (TRL generates at the first micro-batch
// of a generation batch, after the optimizer step's zero_grad; on one GPU
// the pass runs before the accumulated gradients of the replayed
// micro-batch are made). What it allocates is freed when it ends (generate
// returns the sequences, a few kilobytes, which the batch stands for); its
// allocations count in the step's peaks, largest allocation and OOM, in
// phase "generation". Its FLOPs are not part of the step's time.
func (r *Replay) generationPass() {
	if r.genProg == nil || r.genDone {
		return
	}
	r.genDone = true
	prog, plan := r.genProg, r.genPlan
	v := NewReplay(prog, plan, r.opts, 0)
	v.alloc, v.Rep, v.cur = r.alloc, r.Rep, r.cur
	grew := r.alloc.Grew // as validationPass: v's requests report their growth to v
	v.alloc.Grew = func(g alloc.Growth) { v.growth, v.grew = g, true }
	v.fwdPhase = PhaseGeneration
	flops, saved, savedW := r.Rep.FLOPs, r.Rep.SavedActivations, r.Rep.SavedWeightCopies
	for _, b := range prog.BatchValues() {
		v.phase, v.op = PhaseGeneration, "prompts"
		v.produce(b)
	}
	v.forward()
	v.op = "end of generate"
	for _, t := range v.valT { // the prompts, the caches, the sampler's tensors: dropped when generate returns
		if t != none {
			v.release(t)
		}
	}
	r.alloc, r.cur = v.alloc, v.cur
	r.alloc.Grew = grew
	r.Rep.FLOPs, r.Rep.SavedActivations, r.Rep.SavedWeightCopies = flops, saved, savedW
	r.phase = PhaseSetup
}
