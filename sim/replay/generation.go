package replay

import (
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
	r.noGradPass(prog, plan, PhaseGeneration, "prompts", "end of generate") // validation.go
	r.phase, r.op = PhaseGeneration, "end of GatheredParameters"
	for _, id := range gathered { // the partitions again (GatheredParameters.__exit__)
		r.release(id)
	}
	r.gatherIDs = gathered[:0]
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
