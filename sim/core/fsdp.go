package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// FSDP's device mesh and policies, as torchtitan and torchtune drive
// fully_shard (torch.distributed.fsdp, FSDP2):
//
//   - the mesh: FSDP shards over the data-parallel and the
//     context-parallel ranks together (torchtitan's "dp_shard_cp" mesh
//     dimension, parallelize_llama.py: context-parallel ranks hold the same
//     weights, so they are data-parallel for the parameters). Megatron's
//     distributed optimizer (data_parallel_group_with_context_parallel) and
//     DeepSpeed ZeRO under Ulysses (the sequence-data-parallel group) shard
//     over the same dp x cp group, so ShardDegree applies to every
//     sharding mode.
//   - HSDP: dp_replicate x dp_shard. The model is sharded over dp_shard x cp
//     ranks (inside a node, typically) and replicated dp_replicate times
//     (across nodes); the sharded gradients are all-reduced over the
//     replicas after the reduce-scatter, in place (_fsdp_collectives.py
//     foreach_reduce: all_reduce of the reduce-scatter output).
//   - units: fully_shard per repeated block and once on the root (every
//     parameter not in another unit); FSDPUnits names more modules wrapped
//     on their own, as torchtune's custom_sharded_layers
//     (["tok_embeddings", "output"]) and torchtitan's apply_fsdp
//     (tok_embeddings; norm and output together) do. A unit of its own is
//     all-gathered and resharded like a block; the root is never resharded
//     after forward (FSDP2 skips the root's post-forward reshard: it would
//     be all-gathered again at once for the backward).
//   - reshard_after_forward: True frees each unit's unsharded parameters
//     after its forward and all-gathers them again for its backward; False
//     keeps them from the forward through the backward (no second
//     all-gather; torchtitan's setting under pipeline parallelism); an int
//     N reshards to N ranks: each rank keeps 1/N of the unit between its
//     forward and its backward, and the backward all-gathers inside that
//     smaller group (usually a node).
//   - MixedPrecisionPolicy(param_dtype, reduce_dtype): the all-gather casts
//     the sharded parameters to param_dtype (the layers compute with
//     those), and the unsharded gradients are reduce-scattered in
//     reduce_dtype. Unset: param_dtype is the autocast dtype of a mixed
//     precision (the parameters' dtype otherwise), reduce_dtype the
//     gradient dtype.

// ShardDegree is the number of ranks each data-parallel sharding mode
// (ZeRO, FSDP, Megatron's distributed optimizer) splits the dense states
// over: dp x cp, divided by the HSDP replicas.
func (p Parallelism) ShardDegree() int64 {
	// Norm's degrees, read one by one (Norm copies the whole layout in
	// and out: the search reads this degree at every layout's bound).
	return OrOne(p.DP) * OrOne(p.CP) / max(OrOne(p.DPReplicate), 1)
}

// ExpertShardDegree is the sharding degree of expert parameters: the
// expert-data-parallel group, dp x cp x tp / (ep x expert_tp), divided by
// the HSDP replicas (every ep ranks hold different experts; expert.go).
func (p Parallelism) ExpertShardDegree() int64 {
	return max(p.ShardDegree()*OrOne(p.TP)/(OrOne(p.EP)*p.ETPn()), 1)
}

// FSDPParams is the dtype FSDP all-gathers parameters in: the policy's
// param_dtype, else the autocast dtype of a mixed precision, else the
// parameters' own.
func (p Parallelism) FSDPParams(prec Precision) units.DType {
	switch {
	case p.FSDPParamDType != units.InvalidDType:
		return p.FSDPParamDType
	case prec.Autocast:
		return prec.Compute
	}
	return prec.Params
}

// FSDPReduce is the dtype FSDP reduce-scatters gradients in: the policy's
// reduce_dtype; else, for FSDP1, param_dtype: MixedPrecision's reduce_dtype
// "If this is None but param_dtype is not None, then this takes on the
// param_dtype value, still running gradient reduction in low precision"
// (pytorch/pytorch fe03cf693c, torch/distributed/fsdp/api.py), as Hugging
// Face accelerate's policy sets it (MixedPrecision(param_dtype=dtype,
// reduce_dtype=dtype, buffer_dtype=dtype)); else (FSDP2) the plan's
// gradient dtype, torchtitan's mixed_precision_reduce default (float32).
func (p Parallelism) FSDPReduce(prec Precision) units.DType {
	switch {
	case p.FSDPReduceDType != units.InvalidDType:
		return p.FSDPReduceDType
	case p.FSDPVersion == 1:
		return p.FSDPParams(prec)
	}
	return prec.Grads
}

// validateFSDP checks the FSDP options against themselves.
func (par Parallelism) validateFSDP() error {
	if par.DPReplicate < 0 || par.ReshardTo < 0 {
		return parallelErr("dp_replicate and reshard_after_forward must be positive (got %d, %d)", par.DPReplicate, par.ReshardTo)
	}
	fsdpOnly := []struct {
		set  bool
		what string
	}{
		{par.NoReshard || par.ReshardTo > 0, "reshard_after_forward"},
		{len(par.FSDPUnits) > 0, "fsdp_units"},
		{par.FSDPParamDType != units.InvalidDType, "param_dtype"},
		{par.FSDPReduceDType != units.InvalidDType, "reduce_dtype"},
	}
	for _, o := range fsdpOnly {
		if o.set && !par.FSDP {
			return &units.Error{Path: "parallel", Msg: o.what + "= is an FSDP option", Hint: "add fsdp=True"}
		}
	}
	if par.DPReplicate > 1 {
		if !par.FSDP {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("dp_replicate=%d is HSDP, an FSDP mesh", par.DPReplicate), Hint: "add fsdp=True (HSDP: replicate across dp_replicate groups, shard inside each)"}
		}
		if par.DP%par.DPReplicate != 0 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("dp_replicate=%d does not divide dp=%d", par.DPReplicate, par.DP),
				Hint: "HSDP splits the dp ranks into dp_replicate groups of dp_shard = dp/dp_replicate ranks each"}
		}
	}
	if par.AdapterUnits && (!par.FSDP || par.FSDPVersion != 1) {
		return &units.Error{Path: "parallel", Msg: "fsdp_adapter_units= is peft's FSDP1 wrap policy",
			Hint: "add fsdp=1 (accelerate's FullyShardedDataParallel, which peft's fsdp_auto_wrap_policy wraps)"}
	}
	if par.SyncEachBatch && par.FSDP && par.FSDPVersion != 1 {
		return &units.Error{Path: "parallel", Msg: "fsdp_sync_each_batch= is FSDP1's: FSDP2 (fully_shard) reduce-scatters every micro-batch unless fsdp_no_sync=True",
			Hint: "add fsdp=1 (FullyShardedDataParallel, whose no_sync() the trainers use while accumulating); FSDP2 without gradient sync is fsdp_no_sync=True"}
	}
	if par.SyncStates && (!par.FSDP || par.FSDPVersion != 1) {
		return &units.Error{Path: "parallel", Msg: "fsdp_sync_module_states= is FSDP1's (FullyShardedDataParallel(sync_module_states=True))",
			Hint: "add fsdp=1, or drop fsdp_sync_module_states: it only adds the wrap's broadcast buckets to what FSDP1's construction leaves cached"}
	}
	if err := validBackwardPrefetch(par); err != nil {
		return err
	}
	if par.ForwardPrefetch && (!par.FSDP || par.FSDPVersion != 1) {
		return &units.Error{Path: "parallel", Msg: "fsdp_forward_prefetch= is FSDP1's (FullyShardedDataParallel(forward_prefetch=True))",
			Hint: "add fsdp=1; FSDP2 (fully_shard) gathers each unit in its own pre-forward unless set_modules_to_forward_prefetch asks, which memsh does not model"}
	}
	if par.FSDPNoSync && (!par.FSDP || par.FSDPVersion == 1) {
		return &units.Error{Path: "parallel", Msg: "fsdp_no_sync= is FSDP2's (fully_shard's set_requires_gradient_sync(False) while accumulating)",
			Hint: "FSDP1 (fsdp=1) accumulates under no_sync() already unless fsdp_sync_each_batch=True; add fsdp=True for FSDP2"}
	}
	if par.FSDPNoSync && par.PP > 1 {
		return &units.Error{Path: "parallel", Msg: "fsdp_no_sync= with pp > 1: a pipeline stage's FSDP2 keeps its gradients unsharded until the last micro-batch already (torch.distributed.pipelining)",
			Hint: "drop fsdp_no_sync"}
	}
	if par.SyncEachBatch && !par.FSDP {
		return &units.Error{Path: "parallel", Msg: "fsdp_sync_each_batch= is FSDP1's (FullyShardedDataParallel's no_sync()), and this layout has no fsdp=",
			Hint: "add fsdp=1 (FullyShardedDataParallel), or drop fsdp_sync_each_batch: it chooses how FSDP1 accumulates gradients, nothing else"}
	}
	if par.NoReshard && par.ReshardTo > 0 {
		return parallelErr("reshard_after_forward is either False or a group size, not both")
	}
	if n := par.ReshardTo; n > 0 {
		shard := par.ShardDegree()
		if n < 2 || n >= shard || shard%n != 0 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("reshard_after_forward=%d must divide the %d ranks FSDP shards over, and lie strictly between 1 and %d", n, shard, shard),
				Hint: "an int reshards to a smaller group after forward (usually the GPUs of a node); True or False otherwise"}
		}
	}
	for _, u := range par.FSDPUnits {
		if u == "" {
			return &units.Error{Path: "parallel", Msg: "fsdp_units names must not be empty", Hint: `fsdp_units=["embed_tokens", "lm_head"] wraps those modules as their own FSDP units`}
		}
	}
	for _, d := range []units.DType{par.FSDPParamDType, par.FSDPReduceDType} {
		if d != units.InvalidDType && !d.Float() {
			return parallelErr("param_dtype and reduce_dtype must be float dtypes (got %s)", d)
		}
	}
	return nil
}

// FSDP1's backward prefetch modes (Parallelism.BackwardPrefetch), as
// torch 2.15's _runtime_utils.py runs them, measured on the CPU by
// tools/oracle/fsdp1_prefetch.py (sim/fsdp1_prefetch_test.go):
//   - PrefetchPre: a unit's pre-backward hook unshards it and then the
//     next unit of the backward, so two units are gathered through the
//     unit's backward (BackwardPrefetch.BACKWARD_PRE, the default of
//     FullyShardedDataParallel, Lightning's FSDPStrategy);
//   - PrefetchPost: a unit's post-backward hook reshards it, then
//     unshards the next unit, then reduce-scatters its gradient
//     (BACKWARD_POST, MosaicML Composer's default);
//
// With forward_prefetch=True (Parallelism.ForwardPrefetch; False is
// FullyShardedDataParallel's and the Hugging Face Trainer's default,
// though accelerate configs often set fsdp_forward_prefetch: true) a
// unit's pre-forward unshards the next unit of the forward too. The
// unsharded parameters' views are then made before the unit before them
// runs, so autograd runs their gradient's accumulation, and with it the
// unit's post-backward (reshard, reduce-scatter), only after the
// backward of the unit before: each unit's gradient and parameters stay
// unsharded through one more unit's backward (measured with and without
// full checkpointing, in every backward prefetch mode).
//   - PrefetchNone: each unit is unsharded by its own pre-backward hook
//     (backward_prefetch=None: Hugging Face's Trainer's fsdp_config
//     backward_prefetch "NO_PREFETCH" by default, transformers 4.57.1
//     training_args.py l.2028 and 5.25.0 l.2875, which accelerate's
//     FullyShardedDataParallelPlugin turns into None).
const (
	PrefetchPre  = "pre"
	PrefetchPost = "post"
	PrefetchNone = "none"
)

// FSDP1Prefetch is plan p's FSDP1 backward prefetch mode (PrefetchPre
// when unset).
func (p Parallelism) FSDP1Prefetch() string {
	if p.BackwardPrefetch == "" {
		return PrefetchPre
	}
	return p.BackwardPrefetch
}

func validBackwardPrefetch(par Parallelism) error {
	switch par.BackwardPrefetch {
	case "":
		return nil
	case PrefetchPre, PrefetchPost, PrefetchNone:
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("fsdp_backward_prefetch=%q is not a backward prefetch mode", par.BackwardPrefetch),
			Hint: `"pre" (BACKWARD_PRE, FullyShardedDataParallel's default), "post" (BACKWARD_POST) or "none" (NO_PREFETCH, the Hugging Face Trainer's default)`}
	}
	if !par.FSDP || par.FSDPVersion != 1 {
		return &units.Error{Path: "parallel", Msg: "fsdp_backward_prefetch= is FSDP1's (FullyShardedDataParallel(backward_prefetch=...))",
			Hint: "add fsdp=1; FSDP2 (fully_shard) prefetches one unit in the backward, as memsh replays it (accelerate drops backward_prefetch for FSDP2)"}
	}
	return nil
}
