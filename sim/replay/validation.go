package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// validationPass replays the validation forward of prog (lowered by
// lowerValidation) through r's allocator and report.
func (r *Replay) validationPass(prog *core.Program, plan *core.Plan) {
	r.noGradPass(prog, plan, PhaseValidation, "validation batch", "end of validation")
}

// noGradPass replays prog, a forward under no_grad lowered beside the
// step's (a validation pass, GRPO's generation), through r's allocator
// and report in phase: its batch produced (batch names the op), its ops
// run, what it leaves dropped when it ends (end), and the step's FLOPs
// and saved tensors as they were.
func (r *Replay) noGradPass(prog *core.Program, plan *core.Plan, phase Phase, batch, end string) {
	v := NewReplay(prog, plan, r.opts, 0)
	v.alloc, v.Rep, v.cur = r.alloc, r.Rep, r.cur
	// The allocator is copied with r's growth callback: v's requests
	// report their reserve growth to v (allocateParts reads v.grew), and
	// r's callback comes back with the allocator.
	grew := r.alloc.Grew
	v.alloc.Grew = func(g alloc.Growth) { v.growth, v.grew = g, true }
	v.fwdPhase = phase
	flops, saved, savedW := r.Rep.FLOPs, r.Rep.SavedActivations, r.Rep.SavedWeightCopies
	for _, b := range prog.BatchValues() {
		v.phase, v.op = phase, batch
		v.produce(b)
	}
	v.forward()
	v.op = end
	for _, t := range v.valT { // the batch, the output and loss (the prompts, caches and sampler's tensors): dropped with the pass
		if t != none {
			v.release(t)
		}
	}
	r.alloc, r.cur = v.alloc, v.cur
	r.alloc.Grew = grew
	r.Rep.FLOPs, r.Rep.SavedActivations, r.Rep.SavedWeightCopies = flops, saved, savedW
}
