package core

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Parallelism is how a training step is spread over GPUs. The engine
// replays the step for one representative GPU: parallelism rewrites what
// that GPU holds (sharded parameters and state, split layers, pipeline
// stages) and does (collectives, in-flight micro-batches).
//
//   - DP: data-parallel replicas. Alone it is PyTorch DDP (every GPU holds
//     everything; DDP adds its gradient buckets), or Megatron's DDP with the
//     "megatron" precision (an fp32 main-gradient buffer).
//   - Zero 1/2/3: DeepSpeed ZeRO over the DP group (optimizer state; plus
//     gradients; plus parameters). FSDP: PyTorch FSDP2 (fully_shard per
//     repeated block and the root), or FSDP1 (FullyShardedDataParallel)
//     with FSDPVersion 1; its mesh, units and policies are fsdp.go's.
//     DistributedOptimizer: Megatron's (fp32 master weights and Adam state
//     sharded over DP). Every mode shards over dp x cp (ShardDegree).
//   - TP: Megatron tensor parallelism (Shoeybi et al. 2019) inside each
//     attention, MLP, MoE, the vocabulary-parallel embedding, output layer
//     and cross-entropy; SequenceParallel shards the norm, dropout and
//     residual activations along the sequence (Korthikanti et al. 2022).
//   - PP: pipeline stages of the repeated blocks, scheduled 1F1B or
//     interleaved with VirtualStages model chunks per GPU (Narayanan et al.
//     2021); MicroBatches per step (0: the plan's grad_accum).
//   - CP: context parallelism, the sequence split over CP ranks with ring
//     attention. EP: expert parallelism, the experts of each MoE split over
//     EP ranks taken from the DP group, tokens exchanged by all-to-all.
//
// The zero value is one GPU.
type Parallelism struct {
	DP, TP, PP, CP, EP   int64
	Zero                 int
	FSDP                 bool
	FSDPVersion          int // with FSDP: 2 (fully_shard, the default) or 1 (FullyShardedDataParallel)
	SequenceParallel     bool
	Schedule             string // 1f1b | interleaved | zb-h1 | zb-v | dualpipe (pipeline_schedule.go)
	VirtualStages        int64
	MicroBatches         int64
	DistributedOptimizer bool
	CPMode               string // context parallelism: ring (default) | ulysses | allgather (tp.go)
	LossParallel         string // the vocabulary-parallel cross-entropy: megatron (default) | megatron_fused (--cross-entropy-loss-fusion, tp.go) | torch (with tp: loss_parallel.go)
	PPRuntime            string // with pp: what the pipeline keeps, megatron (default) | torch (pipeline_torch.go)
	TPRuntime            string // with tp: what a column-parallel linear saves, megatron (default) | torch (tp.go)
	// Megatron's DDP without --overlap-grad-reduce / --overlap-param-gather
	// (Megatron's own defaults; memsh assumes both, as Megatron's published
	// recipes set them): the gradient reduction runs after the backward
	// (finish_grad_sync makes the synchronous call) and the distributed
	// optimizer's parameter all-gather after its step, both exposed
	// (megatron/core at core_v0.12.0: distributed/param_and_grad_buffer.py,
	// optimizer/distrib_optimizer.py).
	NoOverlapGradReduce, NoOverlapParamGather bool
	// OverlapComm: DeepSpeed ZeRO-1/2's zero_optimization.overlap_comm
	// (off by default at those stages; stage 3 always overlaps): each
	// reduce bucket is reduced, and with ZeRO-Offload its gradients copied
	// to the host, on a side stream behind the backward, through two
	// bucket buffers (deepspeed/runtime/zero/stage_1_and_2.py at edaa722:
	// setup_buckets, reduce_ipg_grads).
	OverlapComm bool
	// DeepSpeed ZeRO's sizes (zero_sizes.go; Plan.ZeroSizes resolves
	// them): zero values are DeepSpeed's defaults.
	ReduceBucketSize, PrefetchBucketSize, ParamPersistenceThreshold, MaxLiveParameters ZeroSize
	// SyncTPComm: a Megatron-LM release before the asynchronous
	// tensor-parallel backward (commit cf7efd4f5a, 2021-08-30): every
	// tensor-parallel collective exposed (sim/timing/tp_overlap.go).
	SyncTPComm bool
	// TPCommOverlap: Megatron's --tp-comm-overlap, Transformer Engine's
	// userbuffers: the forward's sequence-parallel all-gathers and
	// reduce-scatters and the backward's all-gathers of the row-parallel
	// linears' output gradient run in chunks beside the GEMMs that use
	// them (sim/timing/tp_overlap.go). Megatron requires sequence
	// parallelism for it.
	TPCommOverlap bool
	// AsyncTP: torch's micro-pipeline tensor parallelism (async TP, async_tp.go),
	// torchtitan's enable_async_tensor_parallel.
	AsyncTP bool
	// LossDPGroup: the loss is all-reduced over Megatron's data-parallel
	// group without context parallelism (DATA_PARALLEL_GROUP), a process
	// group, and so an NCCL communicator, apart from the gradients'
	// (replay/nccl_megatron.go): Megatron-LM's pretrain_gpt.py loss_func
	// and calculate_per_token_loss before Megatron-Core 0.13, ms-swift's
	// loss_func with those releases.
	LossDPGroup bool
	// GradNormGroup: Megatron-Core 0.14 and later all-reduce the
	// distributed optimizer's gradient norm over a world-sized group of
	// their own (INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP), an NCCL
	// communicator beside the default group's (replay/nccl_megatron.go);
	// before 0.14 over the default group. Megatron's layer without the
	// distributed optimizer holds no such group.
	GradNormGroup bool
	// UnpermuteProbs: Megatron-Core before 0.13 applies the routing
	// weights of its grouped experts in the unpermute, which keeps the
	// experts' outputs for their gradient (nn/moe_megatron.go); 0.13
	// applies them in the experts' SwiGLU.
	UnpermuteProbs bool
	// NoPermuteFusion: Megatron without --moe-permute-fusion. Its
	// alltoall dispatcher permutes with torch ops, whose masked_select
	// reads a count on the host, and syncs with the GPU more often
	// (nn/moe_megatron_sync.go).
	NoPermuteFusion bool
	// SharedExpertOverlap: Megatron's --moe-shared-expert-overlap. Its
	// shared expert's linears lose their own tensor-parallel
	// communication (parallel_mode None) and read an all-gather made
	// before them, so under sequence parallelism its up projection keeps
	// the gathered input for the weight gradient, not the shard
	// (nn/moe.go lowerShared); it runs on a stream of its own
	// (replay/streams.go).
	SharedExpertOverlap bool
	// RouterDType: Megatron's --moe-router-dtype (fp32 or fp64; invalid:
	// None, Megatron's default, the router in its input's dtype). The
	// router's input and weight are cast to it for the gating GEMM, its
	// probs come out in it, and under expert tensor parallelism the
	// experts' outputs are reduce-scattered in it (nn/moe_route.go,
	// nn/moe_megatron.go).
	RouterDType units.DType

	// Expert parallelism in detail (expert.go).
	ETP         int64   // the experts' tensor-parallel degree: 0 (= tp) or 1
	ExpertLoad  float64 // routed rows the busiest rank receives, in balanced shares (0 = 1)
	ExpertWorst bool    // dropless routing's worst case
	// ExpertSpread: how far the rows a rank's experts receive stray from
	// expert_load's share from one micro-batch and layer to the next, a
	// fraction s: the replay draws each layer instance's rows from
	// [1-s, 1+s] times the share (replay/routing.go). 0: every micro-batch
	// routes the same rows.
	ExpertSpread float64

	// Uneven pipeline stages (pipeline_layers.go): blocks per model chunk.
	StageLayers      []int64 // one count per chunk, in chunk order
	StageSplit       string  // "torchtitan": its generated split points
	FirstStageLayers int64   // Megatron --decoder-first-pipeline-num-layers
	LastStageLayers  int64   // Megatron --decoder-last-pipeline-num-layers
	EmbeddingSlot    bool    // Megatron --account-for-embedding-in-pipeline-split
	LossSlot         bool    // Megatron --account-for-loss-in-pipeline-split

	// FSDP's mesh and policies (fsdp.go).
	DPReplicate   int64    // HSDP: replicas of the sharded model; dp/DPReplicate ranks shard it
	NoReshard     bool     // reshard_after_forward=False
	ReshardTo     int64    // reshard_after_forward=N: keep 1/N of each unit between forward and backward
	FSDPUnits     []string // modules wrapped as FSDP units of their own
	AdapterUnits  bool     // FSDP1: every LoRA adapter a unit of its own (peft's fsdp_auto_wrap_policy); implied by quant
	SyncEachBatch bool     // FSDP1: reduce-scatter every micro-batch, no no_sync() while accumulating
	SyncStates    bool     // FSDP1: sync_module_states=True, the wrap broadcasts each unit from rank 0 (replay/fsdp1_wrap.go)
	// BackwardPrefetch is FSDP1's backward_prefetch: "" or "pre"
	// (BackwardPrefetch.BACKWARD_PRE, FullyShardedDataParallel's default),
	// "post" (BACKWARD_POST) or "none" (backward_prefetch=None: what
	// Hugging Face's Trainer and accelerate pass unless told; fsdp.go).
	BackwardPrefetch string
	// ForwardPrefetch is FSDP1's forward_prefetch=True: each unit's
	// pre-forward gathers the next unit too, and in the backward each
	// unit's post-backward runs after the next unit's backward (fsdp.go).
	ForwardPrefetch bool
	FSDPNoSync      bool        // FSDP2: set_requires_gradient_sync(False) on the micro-batches that do not step (accelerate's accumulate())
	FSDPParamDType  units.DType // MixedPrecisionPolicy.param_dtype; invalid: from the precision
	FSDPReduceDType units.DType // MixedPrecisionPolicy.reduce_dtype; invalid: the gradient dtype
}

// norm fills defaults: degrees 1, schedule 1f1b, one virtual stage.
func (p Parallelism) Norm() Parallelism {
	// Each degree in turn, not a loop over their addresses: Norm runs at
	// every collective's group size and every layout of a search (1.1 G
	// of BenchmarkSearchLlama405B16384's 52.8 G instructions with the loop).
	p.DP, p.TP, p.PP, p.CP = OrOne(p.DP), OrOne(p.TP), OrOne(p.PP), OrOne(p.CP)
	p.EP, p.VirtualStages, p.DPReplicate = OrOne(p.EP), OrOne(p.VirtualStages), OrOne(p.DPReplicate)
	if p.Schedule == "" {
		p.Schedule = "1f1b"
		if p.VirtualStages > 1 {
			p.Schedule = "interleaved"
		}
	}
	if p.Schedule == "zb-v" && p.VirtualStages == 1 {
		p.VirtualStages = 2 // its two chunks per stage (pipeline_schedule.go)
	}
	if p.TP == 1 {
		p.SequenceParallel = false // Megatron turns it off without TP
		p.TPCommOverlap = false
	}
	return p
}

// OrOne is a degree as Norm reads it: 0 (unset) is 1.
func OrOne(d int64) int64 {
	if d == 0 {
		return 1
	}
	return d
}

// GPUs is the number of GPUs the layout uses: dp*tp*pp*cp (expert
// parallelism reuses data-parallel ranks).
func (p Parallelism) GPUs() int64 {
	return OrOne(p.DP) * OrOne(p.TP) * OrOne(p.PP) * OrOne(p.CP) // Norm's degrees, without its copies
}

// Active reports whether the plan is spread over more than one GPU or
// shards anything.
func (p Parallelism) Active() bool {
	return p.GPUs() > 1 || OrOne(p.EP) > 1 || p.Zero > 0 || p.FSDP || p.DistributedOptimizer
}

// String is the parallel() call that builds p, defaults omitted.
func (p Parallelism) String() string {
	n := p.Norm()
	var parts []string
	for _, d := range []struct {
		k string
		v int64
	}{{"dp", n.DP}, {"tp", n.TP}, {"pp", n.PP}, {"cp", n.CP}, {"ep", n.EP}} {
		if d.v != 1 {
			parts = append(parts, fmt.Sprintf("%s=%d", d.k, d.v))
		}
	}
	if n.Zero > 0 {
		parts = append(parts, fmt.Sprintf("zero=%d", n.Zero))
	}
	if n.FSDP {
		if n.FSDPVersion == 1 {
			parts = append(parts, "fsdp=1")
		} else {
			parts = append(parts, "fsdp=True")
		}
	}
	if n.DPReplicate > 1 {
		parts = append(parts, fmt.Sprintf("dp_replicate=%d", n.DPReplicate))
	}
	switch {
	case n.NoReshard:
		parts = append(parts, "reshard_after_forward=False")
	case n.ReshardTo > 0:
		parts = append(parts, fmt.Sprintf("reshard_after_forward=%d", n.ReshardTo))
	}
	if len(n.FSDPUnits) > 0 {
		parts = append(parts, fmt.Sprintf("fsdp_units=[%s]", quoteList(n.FSDPUnits)))
	}
	parts = appendFlags(parts, flag{n.AdapterUnits, "fsdp_adapter_units=True"}, flag{n.SyncEachBatch, "fsdp_sync_each_batch=True"},
		flag{n.SyncStates, "fsdp_sync_module_states=True"})
	if n.BackwardPrefetch != "" && n.BackwardPrefetch != PrefetchPre {
		parts = append(parts, fmt.Sprintf("fsdp_backward_prefetch=%q", n.BackwardPrefetch))
	}
	parts = appendFlags(parts, flag{n.ForwardPrefetch, "fsdp_forward_prefetch=True"}, flag{n.FSDPNoSync, "fsdp_no_sync=True"})
	if n.FSDPParamDType != units.InvalidDType {
		parts = append(parts, fmt.Sprintf("param_dtype=%q", n.FSDPParamDType.Name()))
	}
	if n.FSDPReduceDType != units.InvalidDType {
		parts = append(parts, fmt.Sprintf("reduce_dtype=%q", n.FSDPReduceDType.Name()))
	}
	parts = appendFlags(parts, flag{n.SequenceParallel, "sequence_parallel=True"})
	if n.ETP > 0 && n.ETP != n.TP {
		parts = append(parts, fmt.Sprintf("expert_tp=%d", n.ETP))
	}
	switch {
	case n.ExpertWorst:
		parts = append(parts, `expert_load="worst"`)
	case n.ExpertLoad > 1:
		parts = append(parts, fmt.Sprintf("expert_load=%g", n.ExpertLoad))
	}
	if n.ExpertSpread > 0 {
		parts = append(parts, fmt.Sprintf("expert_spread=%g", n.ExpertSpread))
	}
	if n.CPMode != "" && n.CPMode != "ring" {
		parts = append(parts, fmt.Sprintf("cp_mode=%q", n.CPMode))
	}
	if n.LossParallel != "" && n.LossParallel != "megatron" {
		parts = append(parts, fmt.Sprintf("loss_parallel=%q", n.LossParallel))
	}
	if n.PPRuntime != "" && n.PPRuntime != "megatron" {
		parts = append(parts, fmt.Sprintf("pp_runtime=%q", n.PPRuntime))
	}
	if n.TPRuntime != "" && n.TPRuntime != "megatron" {
		parts = append(parts, fmt.Sprintf("tp_runtime=%q", n.TPRuntime))
	}
	if n.Schedule != "1f1b" {
		parts = append(parts, fmt.Sprintf("schedule=%q", n.Schedule))
	}
	if n.VirtualStages > 1 {
		parts = append(parts, fmt.Sprintf("virtual_stages=%d", n.VirtualStages))
	}
	if n.MicroBatches > 0 {
		parts = append(parts, fmt.Sprintf("micro_batches=%d", n.MicroBatches))
	}
	switch {
	case len(n.StageLayers) > 0:
		parts = append(parts, "stage_layers="+stageLayersText(n.StageLayers))
	case n.StageSplit != "":
		parts = append(parts, fmt.Sprintf("stage_layers=%q", n.StageSplit))
	}
	for _, f := range []struct {
		k string
		v int64
	}{{"first_stage_layers", n.FirstStageLayers}, {"last_stage_layers", n.LastStageLayers}} {
		if f.v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", f.k, f.v))
		}
	}
	parts = appendFlags(parts, flag{n.EmbeddingSlot, "account_for_embedding=True"}, flag{n.LossSlot, "account_for_loss=True"},
		flag{n.DistributedOptimizer, "distributed_optimizer=True"}, flag{n.NoOverlapGradReduce, "overlap_grad_reduce=False"},
		flag{n.NoOverlapParamGather, "overlap_param_gather=False"}, flag{n.OverlapComm, "overlap_comm=True"})
	for _, z := range n.zeroSizeKeys() {
		if z.size.Set || z.size.Auto {
			parts = append(parts, z.name+"="+z.size.String())
		}
	}
	parts = appendFlags(parts, flag{n.SyncTPComm, "async_tp_comm=False"}, flag{n.TPCommOverlap, "tp_comm_overlap=True"},
		flag{n.AsyncTP, "async_tp=True"}, flag{n.LossDPGroup, "loss_dp_group=True"}, flag{n.GradNormGroup, "grad_norm_group=True"},
		flag{n.UnpermuteProbs, "unpermute_probs=True"}, flag{n.NoPermuteFusion, "permute_fusion=False"}, flag{n.SharedExpertOverlap, "shared_expert_overlap=True"})
	if n.RouterDType != units.InvalidDType {
		parts = append(parts, fmt.Sprintf("router_dtype=%q", n.RouterDType.Name()))
	}
	return "parallel(" + strings.Join(parts, ", ") + ")"
}

// flag is a boolean setting and the keyword text String writes when it is on.
type flag struct {
	on   bool
	text string
}

// appendFlags appends the text of each flag that is on, in order.
func appendFlags(parts []string, flags ...flag) []string {
	for _, f := range flags {
		if f.on {
			parts = append(parts, f.text)
		}
	}
	return parts
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// microBatches is the micro-batch count per step and pipeline.
func (p *Plan) MicroBatches() int64 {
	if m := p.Parallel.MicroBatches; m > 0 {
		return m
	}
	return max(p.GradAccum, 1)
}

// padVocab is Megatron's --make-vocab-size-divisible-by 128 times tp.
func PadVocab(v, tp int64) int64 {
	q := 128 * tp
	return (v + q - 1) / q * q
}
