package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

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
	if err := par.validZeroSizes(); err != nil { // zero_sizes.go
		return err
	}
	if v := par.FSDPVersion; v != 0 && (v < 1 || v > 2) {
		return parallelErr("fsdp version must be 1 or 2 (got %d)", v)
	}
	if v := par.FSDPVersion; v != 0 && !par.FSDP {
		return parallelErr("fsdp version %d without fsdp on", v)
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
	case "", "megatron", MegatronFusedCE, TEParallelCE, "torch":
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("unknown loss_parallel %q (known: megatron, megatron_fused, te, torch)", par.LossParallel)}
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
// model; errors name the numbers. The refusals a search meets by the ten
// thousand are worded when read (units.IntError, RefusalFor).
func (p *Plan) validateParallel(memo *LayoutMemo) error {
	memo.layout(p.Model, &p.Parallel)
	if memo.valid != nil {
		return memo.valid
	}
	par := memo.norm
	if err := p.validateAsyncTP(); err != nil { // async_tp.go
		return err
	}
	if err := p.validZeroAuto(); err != nil { // zero_sizes.go
		return err
	}
	if par.TPCommOverlap && !p.Precision.Megatron {
		return &units.Error{Path: "parallel", Msg: "tp_comm_overlap=True is Transformer Engine's userbuffers under Megatron-Core",
			Hint: `use precision="megatron"`}
	}
	if par.SharedExpertOverlap && !p.Precision.Megatron {
		return &units.Error{Path: "parallel", Msg: "shared_expert_overlap=True is Megatron-Core's --moe-shared-expert-overlap (the shared expert beside the token dispatcher)", Hint: `use precision="megatron"`}
	}
	if par.UnpermuteProbs && !p.Precision.Megatron {
		return &units.Error{Path: "parallel", Msg: "unpermute_probs=True is Megatron-Core 0.12's grouped experts (the routing weights applied in the unpermute)", Hint: `use precision="megatron"`}
	}
	if par.NoPermuteFusion && !p.Precision.Megatron {
		return &units.Error{Path: "parallel", Msg: "permute_fusion=False is Megatron-Core's alltoall dispatcher without --moe-permute-fusion", Hint: `use precision="megatron"`}
	}
	if par.RouterDType != units.InvalidDType && !p.Precision.Megatron {
		return &units.Error{Path: "parallel", Msg: "router_dtype= is Megatron-Core's --moe-router-dtype (its TopKRouter's gating dtype)", Hint: `use precision="megatron"`}
	}
	if d := par.RouterDType; d != units.InvalidDType && d != units.FP32 && d != units.FP64 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("router_dtype must be \"fp32\" or \"fp64\" (got %q), as Megatron's --moe-router-dtype", d.Name()), Hint: "None (the default) runs the router in its input's dtype"}
	}
	if par.LossDPGroup && (!par.DistributedOptimizer && !p.Precision.Megatron || par.FSDP || par.Zero > 0) {
		return &units.Error{Path: "parallel", Msg: "loss_dp_group=True is Megatron's DATA_PARALLEL_GROUP, over which its loss is all-reduced", Hint: `use distributed_optimizer=True or precision="megatron", without zero= or fsdp=`}
	}
	if (par.LossParallel == MegatronFusedCE || par.LossParallel == TEParallelCE) && (par.TP < 2 && !p.Precision.Megatron || !par.Active()) {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("loss_parallel=%q is Megatron's vocabulary-parallel cross-entropy under --cross-entropy-loss-fusion", par.LossParallel), Hint: `use it in a Megatron layout: tp > 1, or precision="megatron" with dp, pp, ep or distributed_optimizer=True`}
	}
	if par.GradNormGroup && (!par.DistributedOptimizer && !p.Precision.Megatron || par.FSDP || par.Zero > 0) {
		return &units.Error{Path: "parallel", Msg: "grad_norm_group=True is the group Megatron's distributed optimizer all-reduces its gradient norm over (Megatron-Core 0.14 and later)", Hint: `use distributed_optimizer=True or precision="megatron", without zero= or fsdp=`}
	}
	if (par.NoOverlapGradReduce || par.NoOverlapParamGather) && !par.DistributedOptimizer && !p.Precision.Megatron {
		return &units.Error{Path: "parallel", Msg: "overlap_grad_reduce= and overlap_param_gather= are Megatron's DDP flags", Hint: `use distributed_optimizer=True or precision="megatron" (PyTorch DDP always overlaps its reduction)`}
	}
	if par.Schedule == "interleaved" {
		if m := p.MicroBatches(); m%par.PP != 0 {
			return units.NewIntError("parallel", "the interleaved schedule needs micro_batches divisible by pp (micro_batches=%d, pp=%d)",
				"Megatron requires num_microbatches % pipeline_parallel_size == 0 for interleaving", m, par.PP)
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
		return units.NewIntError("parallel", "sequence_parallel: tp=%d does not divide the %d tokens per sequence on each rank", "", par.TP, seq/par.CP)
	}
	if p.Model == nil {
		return nil
	}
	return memo.modelFits() // layout_memo.go
}

// validateParallel checks that every layer can be split as the layout asks.
// The layers are checked without their paths first (eachLayer): whether a
// check fails does not depend on the path it is given (LayoutChecker), so
// the paths are built, by validateParallelPaths, only to word a failure.
func (m *Model) validateParallel(par Parallelism) error {
	tp := par.TP
	moe := false
	passed, checker := 0, false // the visits that passed; whether a LayoutChecker failed at the next
	check := func(l Layer) bool {
		if _, ok := l.(ExpertLayer); ok {
			moe = true
		}
		if c, ok := l.(LayoutChecker); ok && !layoutFits(c, par) {
			checker = true
			return false
		}
		if e, ok := l.(TokenLookup); ok {
			if rows, _ := e.LookupShape(); rows%tp != 0 {
				return false
			}
		}
		passed++
		return true
	}
	for _, l := range m.Layers {
		if !eachLayer(l, check) {
			return m.validateParallelPaths(par, passed, checker)
		}
	}
	if (m.Vocab > 0 && m.Vocab%tp != 0) || ((par.EP > 1 || par.RouterDType != units.InvalidDType) && !moe) {
		return m.validateParallelPaths(par, passed, false)
	}
	return nil
}

// validateParallelPaths is validateParallel with each layer's path, the
// first failure's error. The first passed layers (in eachLayer's order)
// passed validateParallel's checks; checker says that the next one's
// LayoutChecker refused the layout (layoutPaths).
func (m *Model) validateParallelPaths(par Parallelism, passed int, checker bool) error {
	tp, ep := par.TP, par.EP
	// The first layer's error is returned whatever follows it: the walk
	// stops there (a search checks thousands of layouts that fail, each
	// at the first block of a model of a hundred).
	w := layoutPaths{par: par, passed: passed, checker: checker}
	var room [128]byte // the paths, on the stack while they fit
	for _, l := range m.Layers {
		if !w.walk(l, append(room[:0], ModuleName(l)...)) { // ChildPath("", nil, l)
			break
		}
	}
	if w.err != nil {
		return w.err
	}
	if w.vocabErr != nil {
		return w.vocabErr
	}
	if m.Vocab > 0 && m.Vocab%tp != 0 {
		return &units.Error{Path: m.Name, Msg: fmt.Sprintf("tp=%d does not divide vocab %d (the output layer)", tp, m.Vocab),
			Hint: fmt.Sprintf("Megatron pads the vocabulary to a multiple of 128*tp (here %d)", PadVocab(m.Vocab, tp))}
	}
	if ep > 1 && !w.moe {
		return &units.Error{Path: m.Name, Msg: fmt.Sprintf("ep=%d but the model has no moe() layer", ep)}
	}
	if par.RouterDType != units.InvalidDType && !w.moe {
		return &units.Error{Path: m.Name, Msg: "router_dtype= sets the dtype of an MoE router, and the model has no moe() layer",
			Hint: "drop router_dtype="}
	}
	return nil
}

// vocabRowsError is the refusal of an embedding at path whose rows tp does
// not divide.
func vocabRowsError(path string, tp, rows int64) error {
	return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the %d embedding rows (vocabulary)", tp, rows),
		Hint: fmt.Sprintf("Megatron pads the vocabulary to a multiple of 128*tp (here %d)", PadVocab(rows, tp))}
}
