package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// generationPass replays GRPO's generation phase (transformers' generate,
// vllm=None: core/generation.go) through r's allocator and report, once a
// step: after the weights and optimizer state exist and before the step's
// batch, with the gradients None (TRL generates at the first micro-batch
// of a generation batch, after the optimizer step's zero_grad; on one GPU
// the pass runs before the accumulated gradients of the replayed
// micro-batch are made, and under ZeRO-1 and 2 before theirs; ZeRO-3's
// gradient partitions are allocated at init and stay). What it allocates is freed when it ends (generate
// returns the sequences, a few kilobytes, which the batch stands for); its
// allocations count in the step's peaks, largest allocation and OOM, in
// phase "generation". Its FLOPs are not part of the step's time.
func (r *Replay) generationPass() {
	if r.genProg == nil || r.genDone {
		return
	}
	r.genDone = true
	prog, plan := r.genProg, r.genPlan
	r.phase, r.op = PhaseGeneration, "GatheredParameters"
	gathered := r.Dist.gatherForGeneration(r, r.gatherIDs[:0])
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
	r.phase, r.op = PhaseGeneration, "end of GatheredParameters"
	for _, id := range gathered { // the partitions again (GatheredParameters.__exit__)
		r.release(id)
	}
	r.gatherIDs = gathered[:0]
	r.Rep.FLOPs, r.Rep.SavedActivations, r.Rep.SavedWeightCopies = flops, saved, savedW
	r.phase = PhaseSetup
}

// gatherForGeneration allocates, under ZeRO-3, every unit of the policy
// that is not gathered already (persistent ones are), whole: TRL's
// unwrap_model_for_generation (trl/models/utils.py at 1.16.0, with
// ds3_gather_for_generation, GRPOConfig's default True) enters
// deepspeed.zero.GatheredParameters(model.parameters()) around generate,
// which all-gathers each parameter into a buffer of its partition's size
// times the world size (partition_parameters.py
// _allgather_params_coalesced) and keeps it until the context exits. The
// reference copy (a model of its own) is not gathered. It appends the
// tensors' ids to ids; nothing on one GPU and other layouts.
func (d *distState) gatherForGeneration(r *Replay, ids []int32) []int32 {
	if d == nil || d.Mode != DistZeRO || d.Par.Zero < 3 {
		return ids
	}
	for u := range d.units {
		un := &d.units[u]
		if un.tensor != none || un.reference {
			continue
		}
		b := d.gatheredBytes(int32(u))
		ids = append(ids, d.alloc(r, un.name+" gathered for generate", []int64{d.gatheredSize(int32(u))}, d.gatherDT, b, core.CatComm,
			"the policy's parameters all-gathered whole for generate (deepspeed.zero.GatheredParameters in TRL's unwrap_model_for_generation, ds3_gather_for_generation)"))
	}
	return ids
}
