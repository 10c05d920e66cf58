package replay

import (
	"cmp"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Data-parallel sharding: what each GPU holds of the parameters, gradients
// and optimizer state, and when the sharded parts are gathered. The modes:
//
//   - replicated: no data-parallel wrapper (tp/pp/cp/ep alone, dp=1): the
//     one-GPU setup with this rank's share of the layers.
//   - ddp: PyTorch DistributedDataParallel. Everything replicated; the
//     reducer allocates flat bucket tensors holding a copy of every
//     trainable gradient when it is built (c10d/reducer.cpp
//     initialize_buckets: bucket.gradients = at::empty(...); with the
//     default gradient_as_bucket_view=False the gradients are copied in and
//     out of them), bucket_cap_mb=25, the first bucket 1 MiB.
//   - megatron: Megatron-LM's DDP (megatron/core/distributed/
//     param_and_grad_buffer.py): parameters and a persistent main-gradient
//     buffer in the gradient dtype (fp32 with --bf16), the weight
//     gradients accumulated straight into it (gradient-accumulation
//     fusion); with the distributed optimizer the fp32 master weights and
//     Adam state are sharded over dp (distrib_optimizer.py), 6 + 12/dp
//     bytes per parameter (docs/.../dist_optimizer.md; Megatron-LM #654).
//   - zero: DeepSpeed ZeRO (Rajbhandari et al. 2019), stage 1 and 2 in
//     deepspeed/runtime/zero/stage_1_and_2.py, stage 3 in stage3.py and
//     partitioned_param_coordinator.py. Details at each function.
//   - fsdp: PyTorch FSDP2 (torch.distributed.fsdp.fully_shard, files
//     _fsdp_param.py, _fsdp_param_group.py, _fsdp_collectives.py), one
//     unit per repeated block, one per module named in fsdp_units and one
//     for the rest (the root); FSDP1 in fsdp1.go.
//
// Every mode shards over the data-parallel and context-parallel ranks
// together, less HSDP's replicas (core.Parallelism.ShardDegree).
type DistMode uint8

const (
	DistReplicated DistMode = iota
	DistDDP
	DistMegatron
	DistZeRO
	DistFSDP
)

var distModeNames = [...]string{"replicated", "ddp", "megatron", "zero", "fsdp"}

// String is the mode's name as the comment above gives it: "zero", "fsdp".
func (m DistMode) String() string {
	if int(m) < len(distModeNames) {
		return distModeNames[m]
	}
	return "unknown"
}

// DeepSpeed and PyTorch defaults.
const (
	zeroSubGroup   = 1_000_000_000 // sub_group_size, elements
	DdpBucketCap   = 25 << 20      // DistributedDataParallel(bucket_cap_mb=25)
	ddpFirstBucket = 1 << 20       // dist._DEFAULT_FIRST_BUCKET_BYTES
)

// gatherUnit is a set of parameters gathered together (ZeRO-3: a module;
// FSDP: a block, or the root).
type gatherUnit struct {
	name        string
	params      []int32
	numel       int64 // unsharded elements
	first, last int32 // first and last forward op reading it (outside the reference forward)
	// refFirst and refLast: the first and last op of DPO's reference
	// forward over the policy's own modules (core.RefForward, reference
	// "adapters") reading it, none if none: a second span of the
	// forward, gathered and resharded again, with no backward.
	refFirst, refLast int32
	keep              bool    // never resharded (persistent small params)
	root              bool    // FSDP root: kept from forward through backward
	postFwd           int32   // FSDP reshard_after_forward=N: the 1/N shard kept until the backward
	tensor            int32   // the gathered parameters, none when sharded
	pending           int32   // FSDP2: a backward prefetch's all-gather output, not yet copied out, none
	grad              int32   // FSDP: its sharded gradient, none until reduced
	trainable         bool    // holds a parameter that requires grad
	reference         bool    // holds DPO's reference copy only (core.ParamInfo.Reference): never gathered in the backward
	flatGrad          int32   // FSDP1: the unsharded gradient of the whole unit
	idle              []int32 // FSDP1: parameters no op reads that its FlatParameter holds all the same (fsdp1_idle.go), in numel
}

// distState is the distributed part of one replay.
type distState struct {
	Mode     DistMode
	Par      core.Parallelism
	plan     *core.Plan
	p        *core.Program
	dp, edp  int64       // sharding degrees of dense and expert parameters
	gatherDT units.DType // dtype of gathered parameters and their unsharded grads
	reduceDT units.DType // FSDP: dtype of the reduce-scatter (MixedPrecisionPolicy.reduce_dtype)
	pendingN int         // FSDP2: units prefetched in the backward and not yet copied out (gatherUnit.pending)

	units   []gatherUnit
	unitOf  []int32        // by parameter, -1 when not gathered
	blocks  map[string]int // FSDP: the modules wrapped as units (fsdpBlocks), for unitKey
	opUnits [][]int32
	refOps  []bool  // by op: in DPO's reference forward over the policy's modules (no backward); nil without one
	order   []int32 // units by first forward use
	posOf   []int   // each unit's position in order (prefetch), built on first use
	live    int64   // elements of gathered units that are not kept whole

	// seeds are the pipeline outputs by producer op (seedOps), in the
	// stage's order for one op: a list sorted once, where a map of lists
	// made a list for each output (6 of BenchmarkSearchLlama70B1024's
	// 312 MB/op).
	seeds   []core.StageOut
	seedOps []int32 // each seed's producer op, ascending
	seeded  []bool  // by op: it has seeds (the backward looks at every op)
	// torch.distributed.pipelining (pipeline_torch.go): gradient receive
	// buffers by output, received activations whose gradients live until
	// the step ends, and those gradients' allocations.
	seedBuf   map[core.Value]int32
	heldGrad  map[core.Value]bool
	keptGrads []int32

	ipg  int32       // ZeRO-1/2 reduce bucket, live during backward
	ipg2 int32       // its double buffer with overlap_comm
	zg   *zeroGrads  // ZeRO-1/2's gradient partition and zero gradients (zero_grads.go), nil otherwise
	z3   zero3Bucket // ZeRO-3's reduce bucket (zero3_reduce.go)
	// bf16opt: DeepSpeed runs this ZeRO-1 as its BF16_Optimizer (zero_accum.go)
	bf16opt bool

	// FSDP's CPU offload (and ZeRO-3 offload_param's partitions to the
	// GPU): the bytes per step of the shards' copies to the GPU and of the
	// gradient shards' to the host (fsdp_offload.go).
	fsdpDown, fsdpUp int64
	pageableUp       int64 // copies into pageable host memory (shard_offload.go PageableD2H)

	fsdp1 bool // FullyShardedDataParallel semantics
	// postWaiting is the FSDP1 unit whose post-backward waits for the
	// backward of the unit before it (forward_prefetch), none.
	postWaiting int32
	zs          core.ZeroSizes // ZeRO: the plan's bucket and threshold sizes
	// fsdp1Idle marks the parameters in FSDP1 units that never run
	// (fsdp1IdleShards): no gradient, no state, not stepped.
	fsdp1Idle []bool
	noSync    bool // a micro-batch that reduces no gradient (FSDPNoSync): gradients stay unsharded
	// FSDP1 under reentrant checkpointing (fsdp1_reentrant.go): recompute
	// inputs held until the backward ends, their gradients, and those
	// gradients' allocations.
	leakedIn    []int32 // allocations
	leakedGrad  map[core.Value]bool
	leakedGrads []int32
	// FSDP2 on a pipeline stage (torch.distributed.pipelining): every unit
	// stays gathered and its gradients unsharded until the last
	// micro-batch (fsdp_pipeline.go).
	pipeHold bool
	// standIn: the program is a stand-in (the search's: parameters and
	// no op, NewStandInDist), which leaves out what no gather reaches
	// itself; its parameters are placed by name.
	standIn bool
	// Its chunks' post-backward (fsdp_pipeline.go): the chunks whose last
	// backward ends at an op, the units of each chunk, and how many of a
	// unit's chunks have not finished their backward.
	chunkEnd     map[int32][]int
	chunkUnits   [][]int32
	unitChunksTo []int
	// grouped is groups' lists once made, groups(false)'s then
	// groups(true)'s: the program's parameters do not change while it
	// replays, and a Megatron stage's setup, step and collectives asked
	// for them a dozen times a replay, each a list of every parameter.
	grouped [2][]paramGroup
}

// newDist returns the distributed state of a replay, nil on one GPU. It
// fails when fsdp_units names no module of the program.
func NewDist(plan *core.Plan, prog *core.Program) (*distState, error) {
	if !plan.Parallel.Active() && prog.Stage == nil {
		return nil, nil
	}
	par := plan.Parallel.Norm()
	d := &distState{Par: par, plan: plan, p: prog, dp: par.ShardDegree(), edp: par.ExpertShardDegree(),
		ipg: none, ipg2: none, postWaiting: none, gatherDT: plan.Precision.Params, reduceDT: plan.Precision.Grads}
	d.Mode = ModeOf(plan)
	if d.Mode == DistZeRO {
		d.zs = plan.ZeroSizes()            // reduce_bucket_size, ZeRO-3's prefetch and persistence (core/zero_sizes.go)
		d.reduceDT = plan.Precision.Params // communication_data_type, whatever grad_accum_dtype (zero_accum.go)
		d.bf16opt = plan.ZeroBF16Optimizer()
	}
	if d.Mode == DistFSDP {
		d.fsdp1 = par.FSDPVersion == 1
		d.noSync = FSDPNoSync(plan)
		d.pipeHold = !d.fsdp1 && prog.Stage != nil
		// MixedPrecisionPolicy: the all-gather casts to param_dtype.
		d.gatherDT, d.reduceDT = par.FSDPParams(plan.Precision), par.FSDPReduce(plan.Precision)
	}
	if prog.Stage != nil {
		outs := prog.Stage.Outputs
		d.seeds, d.seedOps, d.seeded = slices.Clone(outs), make([]int32, len(outs)), make([]bool, len(prog.Ops))
		producer := func(o core.StageOut) int32 { return prog.Values[o.V].Producer }
		slices.SortStableFunc(d.seeds, func(a, b core.StageOut) int { return cmp.Compare(producer(a), producer(b)) })
		for k, o := range d.seeds {
			d.seedOps[k] = producer(o)
			d.seeded[d.seedOps[k]] = true
		}
	}
	if d.Mode == DistFSDP || (d.Mode == DistZeRO && par.Zero == 3) {
		if err := d.buildUnits(); err != nil {
			return nil, err
		}
		if d.pipeHold {
			d.pipeChunks()
		}
	}
	return d, nil
}

// NewStandInDist is NewDist for a stand-in program (the search's: its
// parameters alone, sim/search/stand_in.go) of a pipelined layout when
// stage is set: FSDP2 keeps a stage's units gathered through the step
// (pipeHold), as the Dist of a lowered stage program, which has a Stage,
// does, so its gathers are counted once a step (passGathers).
func NewStandInDist(plan *core.Plan, prog *core.Program, stage bool) (*distState, error) {
	d, err := NewDist(plan, prog)
	if d != nil {
		d.standIn = true
		if stage && d.Mode == DistFSDP && !d.fsdp1 {
			d.pipeHold = true
		}
	}
	return d, err
}

// ModeOf is the sharding mode of a distributed replay of plan (NewDist's
// Mode; DistReplicated where no rule applies).
func ModeOf(plan *core.Plan) DistMode {
	par := plan.Parallel.Norm()
	switch {
	case par.FSDP:
		return DistFSDP
	case par.Zero > 0:
		return DistZeRO
	case par.DistributedOptimizer || plan.Precision.Megatron:
		return DistMegatron
	case par.DP > 1:
		return DistDDP
	}
	return DistReplicated
}

// root returns the parameter pi stands for (tied weights share one).
func (d *distState) root(pi int32) int32 {
	if t := d.p.Params[pi].TiedTo; t >= 0 {
		return t
	}
	return pi
}

// degree is the sharding degree of parameter pi: expert parameters are
// sharded over the expert-data-parallel group (dp/ep ranks hold the same
// experts; DeepSpeed-MoE and Megatron after PR #4687 alike).
func (d *distState) Degree(pi int32) int64 { return d.degreeOf(d.p.Params[pi].Role) }

// degreeOf is the sharding degree of a parameter of role: the expert
// data-parallel group's for an expert's, else dp.
func (d *distState) degreeOf(role core.Role) int64 {
	if IsExpertRole(role) {
		return d.edp
	}
	return d.dp
}

func IsExpertRole(role core.Role) bool { return strings.HasPrefix(string(role), "expert_") }

// paramGroup is a set of parameters flattened together: the dense and the
// expert parameters (they shard over different groups), trainable ones
// only for the optimizer.
type paramGroup struct {
	name   string
	params []int32
	numel  int64
	fp8    int64 // of numel, the elements gathered in fp8 (torchao float8 under FSDP2; TE fp8 primary weights)
	mxfp8  int64 // of numel, TE's MXFP8 primary weights: stored as module buffers, gathered in bf16
	n      int64 // sharding degree
}

// groups returns the trainable or the frozen parameters' groups, made
// at the first call (grouped); its callers only read them.
func (d *distState) groups(trainable bool) []paramGroup {
	k := 0
	if trainable {
		k = 1
	}
	if d.grouped[k] == nil {
		d.grouped[k] = d.makeGroups(trainable)
	}
	return d.grouped[k]
}

// makeGroups is groups made afresh.
func (d *distState) makeGroups(trainable bool) []paramGroup {
	gs := []paramGroup{{name: "dense", n: d.dp}, {name: "expert", n: d.edp}}
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.TiedTo >= 0 || p.Trainable != trainable || p.Quant != "" { // quantized weights: quant_shard.go
			continue
		}
		g := &gs[0]
		if IsExpertRole(p.Role) {
			g = &gs[1]
		}
		g.params = append(g.params, int32(pi))
		g.numel += p.Numel
		if p.GatherFP8 {
			g.fp8 += p.Numel
		}
		if p.MXFP8Storage {
			g.mxfp8 += p.Numel
		}
	}
	out := gs[:0]
	for _, g := range gs {
		if g.numel > 0 {
			out = append(out, g)
		}
	}
	return out
}

// ZeroPartition is a ZeRO-1/2 flat partition: the group flattened and
// padded to a multiple of 2*n elements (nccl_start_alignment_factor = 2,
// flatten_dense_tensors_aligned), then split n ways.
func ZeroPartition(numel, n int64) int64 {
	a := 2 * n
	return (numel + a - 1) / a * a / n
}

// ceilDiv is ceil(a/b).
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// fsdpShard is FSDP2's shard of a parameter: dim 0 chunked n ways, every
// rank padded to the first chunk's size (_fsdp_param.py, padded_sharded_size).
func fsdpShard(shape []int64, numel, n int64) int64 {
	if len(shape) == 0 || shape[0] == 0 {
		return ceilDiv(numel, n)
	}
	return ceilDiv(shape[0], n) * (numel / shape[0])
}

func (d *distState) alloc(r *Replay, name string, shape []int64, dt units.DType, bytes int64, cat core.Category, why string) int32 {
	return r.allocate(Alloc{Tensor: name, Shape: shape, DType: dt, Bytes: bytes, Why: why, Cat: cat})
}
