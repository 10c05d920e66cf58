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
	LossParallel         string // with tp: the vocabulary-parallel cross-entropy, megatron (default) | torch (loss_parallel.go)
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
	// LossDPGroup: the loss is all-reduced over Megatron's data-parallel
	// group without context parallelism (DATA_PARALLEL_GROUP), a process
	// group, and so an NCCL communicator, apart from the gradients'
	// (replay/nccl_megatron.go): Megatron-LM's pretrain_gpt.py loss_func
	// and calculate_per_token_loss before Megatron-Core 0.13, ms-swift's
	// loss_func with those releases.
	LossDPGroup bool
	// UnpermuteProbs: Megatron-Core before 0.13 applies the routing
	// weights of its grouped experts in the unpermute, which keeps the
	// experts' outputs for their gradient (nn/moe_megatron.go); 0.13
	// applies them in the experts' SwiGLU.
	UnpermuteProbs bool
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

	// Uneven pipeline stages (pipeline_layers.go): blocks per model chunk.
	StageLayers      []int64 // one count per chunk, in chunk order
	StageSplit       string  // "torchtitan": its generated split points
	FirstStageLayers int64   // Megatron --decoder-first-pipeline-num-layers
	LastStageLayers  int64   // Megatron --decoder-last-pipeline-num-layers
	EmbeddingSlot    bool    // Megatron --account-for-embedding-in-pipeline-split
	LossSlot         bool    // Megatron --account-for-loss-in-pipeline-split

	// FSDP's mesh and policies (fsdp.go).
	DPReplicate     int64       // HSDP: replicas of the sharded model; dp/DPReplicate ranks shard it
	NoReshard       bool        // reshard_after_forward=False
	ReshardTo       int64       // reshard_after_forward=N: keep 1/N of each unit between forward and backward
	FSDPUnits       []string    // modules wrapped as FSDP units of their own
	AdapterUnits    bool        // FSDP1: every LoRA adapter a unit of its own (peft's fsdp_auto_wrap_policy); implied by quant
	SyncEachBatch   bool        // FSDP1: reduce-scatter every micro-batch, no no_sync() while accumulating
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
	n := p.Norm()
	return n.DP * n.TP * n.PP * n.CP
}

// Active reports whether the plan is spread over more than one GPU or
// shards anything.
func (p Parallelism) Active() bool {
	n := p.Norm()
	return n.GPUs() > 1 || n.EP > 1 || n.Zero > 0 || n.FSDP || n.DistributedOptimizer
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
	if n.AdapterUnits {
		parts = append(parts, "fsdp_adapter_units=True")
	}
	if n.SyncEachBatch {
		parts = append(parts, "fsdp_sync_each_batch=True")
	}
	if n.FSDPParamDType != units.InvalidDType {
		parts = append(parts, fmt.Sprintf("param_dtype=%q", n.FSDPParamDType.Name()))
	}
	if n.FSDPReduceDType != units.InvalidDType {
		parts = append(parts, fmt.Sprintf("reduce_dtype=%q", n.FSDPReduceDType.Name()))
	}
	if n.SequenceParallel {
		parts = append(parts, "sequence_parallel=True")
	}
	if n.ETP > 0 && n.ETP != n.TP {
		parts = append(parts, fmt.Sprintf("expert_tp=%d", n.ETP))
	}
	switch {
	case n.ExpertWorst:
		parts = append(parts, `expert_load="worst"`)
	case n.ExpertLoad > 1:
		parts = append(parts, fmt.Sprintf("expert_load=%g", n.ExpertLoad))
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
	if n.EmbeddingSlot {
		parts = append(parts, "account_for_embedding=True")
	}
	if n.LossSlot {
		parts = append(parts, "account_for_loss=True")
	}
	if n.DistributedOptimizer {
		parts = append(parts, "distributed_optimizer=True")
	}
	if n.NoOverlapGradReduce {
		parts = append(parts, "overlap_grad_reduce=False")
	}
	if n.NoOverlapParamGather {
		parts = append(parts, "overlap_param_gather=False")
	}
	if n.OverlapComm {
		parts = append(parts, "overlap_comm=True")
	}
	if n.SyncTPComm {
		parts = append(parts, "async_tp_comm=False")
	}
	if n.TPCommOverlap {
		parts = append(parts, "tp_comm_overlap=True")
	}
	if n.LossDPGroup {
		parts = append(parts, "loss_dp_group=True")
	}
	if n.UnpermuteProbs {
		parts = append(parts, "unpermute_probs=True")
	}
	if n.SharedExpertOverlap {
		parts = append(parts, "shared_expert_overlap=True")
	}
	if n.RouterDType != units.InvalidDType {
		parts = append(parts, fmt.Sprintf("router_dtype=%q", n.RouterDType.Name()))
	}
	return "parallel(" + strings.Join(parts, ", ") + ")"
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

func parallelErr(format string, args ...any) *units.Error {
	return &units.Error{Path: "parallel", Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the layout against itself: degrees, the ZeRO stage,
// FSDP's version, which sharding modes combine, and the schedule. The
// checks against the model, the batch and the cluster are the plan's
// (Plan.Validate). parallel() calls it, so a bad layout fails where it is
// written.
func (raw Parallelism) Validate() error {
	for _, d := range []struct {
		k string
		v int64
	}{{"dp", raw.DP}, {"tp", raw.TP}, {"pp", raw.PP}, {"cp", raw.CP}, {"ep", raw.EP},
		{"virtual_stages", raw.VirtualStages}, {"micro_batches", raw.MicroBatches}, {"dp_replicate", raw.DPReplicate}} {
		if d.v < 0 {
			return parallelErr("%s must be positive (got %d)", d.k, d.v)
		}
	}
	par := raw.Norm()
	if par.Zero < 0 || par.Zero > 3 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("zero must be 0, 1, 2 or 3 (got %d)", par.Zero), Hint: "ZeRO stages: 1 shards optimizer state, 2 also gradients, 3 also parameters"}
	}
	if v := par.FSDPVersion; v != 0 && (v < 1 || v > 2 || !par.FSDP) {
		return parallelErr("fsdp version must be 1 or 2 with fsdp on (got %d)", v)
	}
	if par.FSDP && par.Zero > 0 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("fsdp=True and zero=%d are alternatives", par.Zero), Hint: "FSDP full sharding is ZeRO-3's design in PyTorch; pick one"}
	}
	if err := par.validateFSDP(); err != nil {
		return err
	}
	if err := par.validateStageLayers(); err != nil {
		return err
	}
	if err := par.validateExperts(); err != nil {
		return err
	}
	switch par.CPMode {
	case "", "ring", "ulysses", "allgather":
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("unknown cp_mode %q (known: ring, ulysses, allgather)", par.CPMode)}
	}
	switch par.LossParallel {
	case "", "megatron", "torch":
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("unknown loss_parallel %q (known: megatron, torch)", par.LossParallel)}
	}
	switch par.PPRuntime {
	case "", "megatron", "torch":
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("unknown pp_runtime %q (known: megatron, torch)", par.PPRuntime)}
	}
	switch par.TPRuntime {
	case "", "megatron", "torch":
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("unknown tp_runtime %q (known: megatron, torch)", par.TPRuntime)}
	}
	if par.DistributedOptimizer && (par.FSDP || par.Zero > 0) {
		return &units.Error{Path: "parallel", Msg: "distributed_optimizer=True is Megatron's sharding of optimizer state; it cannot be combined with zero= or fsdp="}
	}
	if par.OverlapComm && par.Zero != 1 && par.Zero != 2 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("overlap_comm=True is DeepSpeed ZeRO-1/2's overlap_comm (got zero=%d)", par.Zero),
			Hint: "use zero=1 or zero=2; ZeRO-3 overlaps its communication always (DeepSpeed's default there)"}
	}
	if (par.NoOverlapGradReduce || par.NoOverlapParamGather) && (par.FSDP || par.Zero > 0) {
		return &units.Error{Path: "parallel", Msg: "overlap_grad_reduce= and overlap_param_gather= are Megatron's DDP flags; they cannot be combined with zero= or fsdp="}
	}
	if err := par.validateSchedule(); err != nil { // pipeline_schedule.go
		return err
	}
	if par.TPCommOverlap && !par.SequenceParallel {
		return &units.Error{Path: "parallel", Msg: "tp_comm_overlap=True overlaps sequence parallelism's collectives with the GEMMs: it needs sequence_parallel=True",
			Hint: "Megatron-LM asserts the same (--tp-comm-overlap requires --sequence-parallel)"}
	}
	if par.TPCommOverlap && par.TPRuntime == "torch" {
		return &units.Error{Path: "parallel", Msg: `tp_comm_overlap=True is Transformer Engine's userbuffers under Megatron-Core; tp_runtime="torch" is DTensor's tensor parallelism`,
			Hint: "drop tp_comm_overlap, or use tp_runtime=\"megatron\""}
	}
	return nil
}

// validateParallel checks the layout against itself, the cluster and the
// model; errors name the numbers.
func (p *Plan) validateParallel() error {
	if err := p.Parallel.Validate(); err != nil {
		return err
	}
	par := p.Parallel.Norm()
	if par.TPCommOverlap && p.Precision.Name != "megatron" {
		return &units.Error{Path: "parallel", Msg: "tp_comm_overlap=True is Transformer Engine's userbuffers under Megatron-Core",
			Hint: `use precision="megatron"`}
	}
	if par.SharedExpertOverlap && p.Precision.Name != "megatron" {
		return &units.Error{Path: "parallel", Msg: "shared_expert_overlap=True is Megatron-Core's --moe-shared-expert-overlap (the shared expert beside the token dispatcher)", Hint: `use precision="megatron"`}
	}
	if par.UnpermuteProbs && p.Precision.Name != "megatron" {
		return &units.Error{Path: "parallel", Msg: "unpermute_probs=True is Megatron-Core 0.12's grouped experts (the routing weights applied in the unpermute)", Hint: `use precision="megatron"`}
	}
	if par.RouterDType != units.InvalidDType && p.Precision.Name != "megatron" {
		return &units.Error{Path: "parallel", Msg: "router_dtype= is Megatron-Core's --moe-router-dtype (its TopKRouter's gating dtype)", Hint: `use precision="megatron"`}
	}
	if d := par.RouterDType; d != units.InvalidDType && d != units.FP32 && d != units.FP64 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("router_dtype must be \"fp32\" or \"fp64\" (got %q), as Megatron's --moe-router-dtype", d.Name()), Hint: "None (the default) runs the router in its input's dtype"}
	}
	if par.LossDPGroup && (!par.DistributedOptimizer && p.Precision.Name != "megatron" || par.FSDP || par.Zero > 0) {
		return &units.Error{Path: "parallel", Msg: "loss_dp_group=True is Megatron's DATA_PARALLEL_GROUP, over which its loss is all-reduced", Hint: `use distributed_optimizer=True or precision="megatron", without zero= or fsdp=`}
	}
	if (par.NoOverlapGradReduce || par.NoOverlapParamGather) && !par.DistributedOptimizer && p.Precision.Name != "megatron" {
		return &units.Error{Path: "parallel", Msg: "overlap_grad_reduce= and overlap_param_gather= are Megatron's DDP flags", Hint: `use distributed_optimizer=True or precision="megatron" (PyTorch DDP always overlaps its reduction)`}
	}
	if par.Schedule == "interleaved" {
		if m := p.MicroBatches(); m%par.PP != 0 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("the interleaved schedule needs micro_batches divisible by pp (micro_batches=%d, pp=%d)", m, par.PP), Hint: "Megatron requires num_microbatches % pipeline_parallel_size == 0 for interleaving"}
		}
	}
	if m := p.MicroBatches(); par.Schedule == "dualpipe" && m%2 != 0 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("dualpipe needs an even number of micro-batches (got %d)", m), Hint: "half of them enter from each end of the pipeline"}
	}
	if err := p.validateShardedOffload(par); err != nil {
		return err
	}
	if err := p.validateQuantSharding(par); err != nil {
		return err
	}
	if p.MembersMode == "spread" && p.Members > 1 && par.DP%p.Members != 0 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("members_mode=\"spread\" runs each of the %d members on its own GPU group: dp=%d must be a multiple of %d", p.Members, par.DP, p.Members),
			Hint: "anemoi's num_gpus_per_ensemble = members x num_gpus_per_model: dp counts the members' groups (and data-parallel replicas of them)"}
	}
	if par.PP > 1 && par.Zero >= 2 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("zero=%d cannot be combined with pp=%d", par.Zero, par.PP), Hint: "DeepSpeed supports pipeline parallelism with ZeRO stages 0 and 1 only"}
	}
	if par.EP > 1 && par.DP%par.EP != 0 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("ep=%d does not divide dp=%d", par.EP, par.DP), Hint: "expert-parallel ranks are taken from the data-parallel group"}
	}
	if c := p.Cluster; c.Nodes < 0 || c.GPUsPerNode < 0 || c.IntraGBps < 0 || c.InterGBps < 0 {
		return &units.Error{Path: "cluster", Msg: "cluster sizes and bandwidths must be positive"}
	}
	gpus := par.GPUs()
	if c := p.Cluster; c.Nodes > 0 || c.GPUsPerNode > 0 {
		cl := c.Norm(gpus)
		if have := cl.Nodes * cl.GPUsPerNode; have != gpus {
			return &units.Error{Path: "parallel",
				Msg:  fmt.Sprintf("dp*tp*pp*cp = %d but the cluster has %d GPUs", gpus, have),
				Hint: fmt.Sprintf("dp=%d tp=%d pp=%d cp=%d on %d node(s) of %d GPUs", par.DP, par.TP, par.PP, par.CP, cl.Nodes, cl.GPUsPerNode)}
		}
	}
	seq := p.Seq
	if p.Model != nil && p.Model.Points > 0 && par.CP > 1 {
		// anemoi's model sharding (sim/graph/shard.go): one sample per GPU.
		stacked := p.Members > 1 && (p.MembersMode == "" || p.MembersMode == "stacked")
		if stacked || p.Batch > 1 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("model sharding (cp=%d on a graph model) runs one sample per GPU (got batch %d x %d stacked members)", par.CP, p.Batch, p.Members),
				Hint: "anemoi asserts batch_size == 1 when num_gpus_per_model > 1: pass batch=1 and members_mode=\"spread\" (a GPU group per member) or \"sequential\""}
		}
		seq = par.CP // the grid is split inside the layers
	}
	if par.CP > 1 && seq%par.CP != 0 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("cp=%d does not divide seq %d", par.CP, seq), Hint: "context parallelism splits each sequence into cp equal chunks"}
	}
	if par.SequenceParallel && (seq/par.CP)%par.TP != 0 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("sequence_parallel: tp=%d does not divide the %d tokens per sequence on each rank", par.TP, seq/par.CP)}
	}
	if p.Model == nil {
		return nil
	}
	if err := p.Model.validateParallel(par); err != nil {
		return err
	}
	if par.PP > 1 {
		if _, _, err := stageLayers(p.Model, par); err != nil {
			return err
		}
	}
	return nil
}

// validateParallel checks that every layer can be split as the layout asks.
// The layers are checked without their paths first (eachLayer): whether a
// check fails does not depend on the path it is given (LayoutChecker), so
// the paths are built, by validateParallelPaths, only to word a failure.
func (m *Model) validateParallel(par Parallelism) error {
	tp := par.TP
	moe := false
	check := func(l Layer) bool {
		if _, ok := l.(ExpertLayer); ok {
			moe = true
		}
		if c, ok := l.(LayoutChecker); ok && c.CheckLayout("", par) != nil {
			return false
		}
		if e, ok := l.(TokenLookup); ok {
			if rows, _ := e.LookupShape(); rows%tp != 0 {
				return false
			}
		}
		return true
	}
	for _, l := range m.Layers {
		if !eachLayer(l, check) {
			return m.validateParallelPaths(par)
		}
	}
	if (m.Vocab > 0 && m.Vocab%tp != 0) || ((par.EP > 1 || par.RouterDType != units.InvalidDType) && !moe) {
		return m.validateParallelPaths(par)
	}
	return nil
}

// validateParallelPaths is validateParallel with each layer's path, the
// first failure's error.
func (m *Model) validateParallelPaths(par Parallelism) error {
	tp, ep := par.TP, par.EP
	var err, vocabErr error // vocabulary errors after the layers' own
	moe := false
	// The first layer's error is returned whatever follows it: the walk
	// stops there (a search checks thousands of layouts that fail, each
	// at the first block of a model of a hundred).
	check := func(path string, l Layer) bool {
		if _, ok := l.(ExpertLayer); ok {
			moe = true
		}
		if c, ok := l.(LayoutChecker); ok {
			err = c.CheckLayout(path, par)
		}
		if e, ok := l.(TokenLookup); ok && vocabErr == nil {
			if rows, _ := e.LookupShape(); rows%tp != 0 {
				vocabErr = &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the %d embedding rows (vocabulary)", tp, rows),
					Hint: fmt.Sprintf("Megatron pads the vocabulary to a multiple of 128*tp (here %d)", PadVocab(rows, tp))}
			}
		}
		return err == nil
	}
	for _, l := range m.Layers {
		if !walkWhile(l, ChildPath("", nil, l), check) {
			break
		}
	}
	if err != nil {
		return err
	}
	if vocabErr != nil {
		return vocabErr
	}
	if m.Vocab > 0 && m.Vocab%tp != 0 {
		return &units.Error{Path: m.Name, Msg: fmt.Sprintf("tp=%d does not divide vocab %d (the output layer)", tp, m.Vocab),
			Hint: fmt.Sprintf("Megatron pads the vocabulary to a multiple of 128*tp (here %d)", PadVocab(m.Vocab, tp))}
	}
	if ep > 1 && !moe {
		return &units.Error{Path: m.Name, Msg: fmt.Sprintf("ep=%d but the model has no moe() layer", ep)}
	}
	if par.RouterDType != units.InvalidDType && !moe {
		return &units.Error{Path: m.Name, Msg: "router_dtype= sets the dtype of an MoE router, and the model has no moe() layer",
			Hint: "drop router_dtype="}
	}
	return nil
}

// padVocab is Megatron's --make-vocab-size-divisible-by 128 times tp.
func PadVocab(v, tp int64) int64 {
	q := 128 * tp
	return (v + q - 1) / q * q
}

// deepspeedPrecision is the plan as DeepSpeed runs a mixed-precision
// policy: DeepSpeed does not use torch.autocast; its "bf16"/"fp16" modes
// hold the model in the 16-bit dtype (parameters and gradients) and keep
// fp32 master weights and optimizer state in the ZeRO optimizer (the ZeRO
// paper's mixed-precision Adam). It reports false when nothing changes.
func (p *Plan) DeepspeedPrecision() (*Plan, bool) {
	prec := p.Precision
	if p.Parallel.Norm().Zero == 0 || !prec.Autocast {
		return nil, false
	}
	q := *p
	q.Precision = Precision{Name: prec.Name, Params: prec.Compute, Compute: prec.Compute, Grads: prec.Compute,
		Master: prec.Params, States: prec.States}
	if q.Precision.Master == q.Precision.Params {
		q.Precision.Master = units.FP32
	}
	return &q, true
}
