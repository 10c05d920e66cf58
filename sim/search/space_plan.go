package search

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// plan builds layout l's plan from base.
func (sp *Space) plan(base *core.Plan, l layout) *core.Plan {
	p := new(core.Plan)
	sp.planInto(p, base, l)
	return p
}

// planOf is plan's plan as a value (the checks of every layout keep it
// off the heap).
func (sp *Space) planOf(base *core.Plan, l layout) (p core.Plan) {
	sp.planInto(&p, base, l)
	return p
}

// planInto writes layout l's plan, made from base, to p. The plan is
// 1,728 bytes: written in place, its layout (336 bytes) with it, rather
// than built in locals and copied out (planOf's callers in the loops
// over every layout take it so: a fifth of the search's own
// instructions were these copies).
func (sp *Space) planInto(p *core.Plan, base *core.Plan, l layout) {
	*p = *base
	par := &p.Parallel
	*par = sp.carried
	par.DP, par.TP, par.PP, par.CP, par.EP, par.SequenceParallel = l.dp, l.tp, l.pp, l.cp, l.ep, l.tp > 1
	par.TPCommOverlap = par.TPCommOverlap && l.tp > 1 // Megatron's needs tp (core.Parallelism.Norm)
	par.AsyncTP = par.AsyncTP && l.tp > 1             // torch's micro-pipeline TP needs tp (core/async_tp.go)
	if l.wholeExperts {
		par.ETP = 1 // sequence parallelism is on: tp > 1
	}
	if l.v > 1 {
		par.Schedule, par.VirtualStages = "interleaved", l.v
	}
	switch l.split {
	case splitSlots:
		par.EmbeddingSlot, par.LossSlot = true, true
	case splitUneven:
		par.StageSplit = "torchtitan"
	}
	par.CPMode = l.cpMode.parallel()
	_ = shardingLayout(sp.Sharding[l.sharding], par) // checked by defaults
	if l.rep > 1 {
		par.DPReplicate = l.rep
	}
	if par.FSDP {
		withFSDPOptions(par, &sp.fsdpOptions)
	}
	withZeroSizes(par, &sp.fsdpOptions)
	if l.ckpt < len(sp.ckpts) {
		p.Checkpoint = sp.ckpts[l.ckpt] // parsed by defaults
	} else {
		p.Checkpoint, _ = core.ParseCheckpoint(sp.Checkpoint[l.ckpt]) // a space defaults did not set
	}
	p.Batch, p.GradAccum = l.mbs, l.m
	switch {
	case l.offload == optimizerOnHost:
		p.Offload = sp.optimizerCPU
	case l.offload == paramsOnHost && par.FSDP:
		p.Offload = sp.paramsCPU
	case l.offload == paramsOnHost:
		p.Offload = sp.zeroParamsCPU // ZeRO-3 keeps the optimizer on the GPU unless asked
	case l.offload == optimizerOnNVMe:
		p.Offload = sp.zeroInfinity
	}
	gpn := min(sp.GPUsPerNode, sp.GPUs)
	// p.Cluster is base's: its links and host carried
	p.Cluster.Nodes, p.Cluster.GPUsPerNode = sp.GPUs/gpn, gpn
}

// profileKey is what the lowering of a layout depends on: tensor,
// context and expert degrees (the experts' tensor-parallel one too),
// sequence parallelism, micro-batch and checkpointing, and the casts of
// the sharding (DeepSpeed and FSDP run mixed precision without
// autocast's weight copies; a LoRA plan in bf16 or fp16 without autocast
// keeps PEFT's fp32 adapters on one GPU and under DDP, where ZeRO's and
// FSDP's engines cast them to the model's dtype: core.Plan.AdapterDType).
type profileKey struct {
	tp, cp, ep, mbs          int64
	sp, active, wholeExperts bool
	cpMode                   cpMode
	adapters                 units.DType
	ckpt, casts              string
}

// fsdpRecasts says whether FSDP changes what layout p's lowering casts:
// autocast's weight copies gone, or a param_dtype of its policy other
// than the parameters' (core's Builder under FSDP, tp.go).
func fsdpRecasts(p *core.Plan) bool {
	prec := p.Precision
	if prec.Autocast {
		return true
	}
	d := p.Parallel.FSDPParams(prec)
	return d != prec.Params || d != prec.Compute
}

// keyOf is plan p's profile key (p is layout l's plan).
func (sp *Space) keyOf(p *core.Plan, l layout) profileKey {
	par := p.Parallel
	casts := ""
	switch {
	case par.FSDP && fsdpRecasts(p):
		casts = "fsdp"
	case par.Zero > 0 && p.Precision.Autocast:
		casts = "deepspeed"
	}
	return profileKey{tp: l.tp, cp: l.cp, ep: l.ep, mbs: l.mbs, sp: par.SequenceParallel, active: par.Active(),
		wholeExperts: l.wholeExperts, cpMode: l.cpMode, adapters: p.AdapterDType(), ckpt: sp.Checkpoint[l.ckpt], casts: casts}
}
