package search

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The base plan of a search: every layout is the base plan with the
// space's axes in place of its own (tp, pp, cp, ep, expert_tp, dp and
// HSDP's replicas, sharding, micro-batch and gradient accumulation,
// schedule, virtual stages and the split of the blocks, context-parallel
// mode, checkpointing, the optimizer's offload), and every other setting
// carried unchanged: Megatron's flags (router_dtype, unpermute_probs,
// shared_expert_overlap, tp_comm_overlap, loss_dp_group, ...), train()'s
// settings (compile, LoRA, overheads, ...) and the cluster's links and
// host. A base setting the space cannot hold is refused with a hint, not
// dropped (checkBase).

// carriedLayout is base's layout less the space's axes: what every
// layout of the space keeps. FSDP's own options (version, resharding,
// mixed-precision policy, FSDP1's backward prefetch) and ZeRO's sizes
// are kept apart and set on the layouts that read them only
// (fsdpOptions: withFSDPOptions, withZeroSizes).
func carriedLayout(base core.Parallelism) (carried, fsdp core.Parallelism) {
	par := base
	par.DP, par.TP, par.PP, par.CP, par.EP = 0, 0, 0, 0, 0
	par.Zero, par.FSDP, par.DistributedOptimizer, par.DPReplicate = 0, false, false, 0
	par.SequenceParallel, par.CPMode, par.ETP = false, "", 0
	par.Schedule, par.VirtualStages, par.MicroBatches = "", 0, 0
	par.StageLayers, par.StageSplit, par.FirstStageLayers, par.LastStageLayers = nil, "", 0, 0
	par.EmbeddingSlot, par.LossSlot = false, false
	fsdp = core.Parallelism{FSDPVersion: par.FSDPVersion, NoReshard: par.NoReshard, ReshardTo: par.ReshardTo,
		AdapterUnits: par.AdapterUnits, SyncEachBatch: par.SyncEachBatch, SyncStates: par.SyncStates, FSDPNoSync: par.FSDPNoSync, FSDPParamDType: par.FSDPParamDType, FSDPReduceDType: par.FSDPReduceDType,
		BackwardPrefetch: par.BackwardPrefetch, ForwardPrefetch: par.ForwardPrefetch, ReduceBucketSize: par.ReduceBucketSize, PrefetchBucketSize: par.PrefetchBucketSize,
		ParamPersistenceThreshold: par.ParamPersistenceThreshold, MaxLiveParameters: par.MaxLiveParameters}
	par.FSDPVersion, par.NoReshard, par.ReshardTo, par.AdapterUnits, par.SyncEachBatch, par.SyncStates, par.FSDPNoSync = 0, false, 0, false, false, false, false
	par.FSDPParamDType, par.FSDPReduceDType = units.InvalidDType, units.InvalidDType
	par.BackwardPrefetch, par.ForwardPrefetch = "", false
	par.ReduceBucketSize, par.PrefetchBucketSize, par.ParamPersistenceThreshold, par.MaxLiveParameters = core.ZeroSize{}, core.ZeroSize{}, core.ZeroSize{}, core.ZeroSize{}
	return par, fsdp
}

// withFSDPOptions sets the base plan's FSDP options on par, an fsdp or
// hsdp layout (FSDP1's prefetch modes on an FSDP1 one).
func withFSDPOptions(par *core.Parallelism, o *core.Parallelism) {
	par.FSDPVersion, par.NoReshard, par.ReshardTo, par.AdapterUnits, par.SyncEachBatch, par.SyncStates, par.FSDPNoSync = o.FSDPVersion, o.NoReshard, o.ReshardTo, o.AdapterUnits, o.SyncEachBatch, o.SyncStates, o.FSDPNoSync
	par.FSDPParamDType, par.FSDPReduceDType = o.FSDPParamDType, o.FSDPReduceDType
	if par.FSDPVersion == 1 {
		par.BackwardPrefetch, par.ForwardPrefetch = o.BackwardPrefetch, o.ForwardPrefetch
	}
}

// withZeroSizes sets the base plan's ZeRO sizes on par, a ZeRO layout:
// the reduce bucket at every stage, the stage-3 sizes at stage 3.
func withZeroSizes(par *core.Parallelism, o *core.Parallelism) {
	if par.Zero >= 1 {
		par.ReduceBucketSize = o.ReduceBucketSize
	}
	if par.Zero == 3 {
		par.PrefetchBucketSize, par.ParamPersistenceThreshold, par.MaxLiveParameters = o.PrefetchBucketSize, o.ParamPersistenceThreshold, o.MaxLiveParameters
	}
}

// ReplacedLayout lists the settings of base's layout that a search
// replaces with its axes (sequence parallelism, on at every tp > 1, with
// them), as parallel() and train() spell them ("tp=8",
// "checkpoint=full"); empty when base sets none of them (a plan on one
// GPU without checkpointing). The search's caller shows them, so that
// the replacement is never silent.
func ReplacedLayout(base *core.Plan) []string {
	par := base.Parallel
	var out []string
	deg := func(name string, v int64) {
		if v > 1 {
			out = append(out, fmt.Sprintf("%s=%d", name, v))
		}
	}
	deg("dp", par.DP)
	deg("tp", par.TP)
	deg("pp", par.PP)
	deg("cp", par.CP)
	deg("ep", par.EP)
	if par.ETP == 1 && par.TP > 1 {
		out = append(out, "expert_tp=1")
	}
	if par.TP > 1 && !par.SequenceParallel { // the search runs sequence parallelism with every tp > 1
		out = append(out, "sequence_parallel=False")
	}
	deg("dp_replicate", par.DPReplicate)
	switch {
	case par.Zero > 0:
		out = append(out, fmt.Sprintf("zero=%d", par.Zero))
	case par.FSDP:
		out = append(out, "fsdp=True")
	case par.DistributedOptimizer:
		out = append(out, "distributed_optimizer=True")
	}
	if par.CPMode != "" {
		out = append(out, fmt.Sprintf("cp_mode=%q", par.CPMode))
	}
	if par.Schedule != "" {
		out = append(out, fmt.Sprintf("schedule=%q", par.Schedule))
	}
	deg("virtual_stages", par.VirtualStages)
	if len(par.StageLayers) > 0 || par.StageSplit != "" || par.FirstStageLayers > 0 || par.LastStageLayers > 0 || par.EmbeddingSlot || par.LossSlot {
		out = append(out, "the pipeline's split")
	}
	deg("batch", base.Batch)
	deg("grad_accum", base.GradAccum)
	if base.Checkpoint.Mode != "" && base.Checkpoint.Mode != "none" {
		out = append(out, fmt.Sprintf("checkpoint=%q", base.Checkpoint.Mode))
	}
	return out
}

// checkBase refuses a base setting that conflicts with the space's axes
// and that no layout of the space can hold.
func checkBase(p *core.Plan) error {
	switch s := p.Parallel.Schedule; s {
	case "", "1f1b", "interleaved":
	default:
		return &units.Error{Path: "search", Msg: fmt.Sprintf("the plan's schedule=%q is not a schedule search varies (1f1b, and interleaved with virtual_stages > 1)", s),
			Hint: "drop schedule= from the plan's parallel() to search the 1F1B and interleaved layouts, or simulate(plan) the plan as it is"}
	}
	if o := p.Offload; o != nil && (o.Optimizer != "" || o.Params != "") {
		return &units.Error{Path: "search", Msg: "the plan offloads its optimizer or parameters: offload is an axis of the search",
			Hint: "drop offload() from the plan and pass search(..., offload=[\"none\", \"optimizer\", \"params\", \"nvme\"]): the optimizer on the host for the zero1-3 layouts, the parameters for the zero3 and fsdp ones, the optimizer on NVMe for the zero3 ones"}
	}
	return nil
}
