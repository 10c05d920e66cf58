package builtins

import (
	"fmt"
	"strconv"

	"github.com/memsh/memsh/sim"
	"go.starlark.net/starlark"
)

// Parallel is the Starlark value of a distributed layout (type
// "parallel"), from parallel(dp=..., tp=..., ...), for train(parallel=).
type Parallel struct{ p sim.Parallelism }

// Cluster is the Starlark value of the machines a plan runs on (type
// "cluster"), from cluster(...), for train(cluster=).
type Cluster struct{ c sim.Cluster }

var (
	_ starlark.HasAttrs = Parallel{}
	_ starlark.HasAttrs = Cluster{}
)

// SimParallelism is the wrapped layout.
func (x Parallel) SimParallelism() sim.Parallelism { return x.p }

// SimCluster is the wrapped cluster.
func (x Cluster) SimCluster() sim.Cluster { return x.c }

func (x Parallel) Type() string          { return "parallel" }
func (x Parallel) Freeze()               {}
func (x Parallel) Truth() starlark.Bool  { return starlark.True }
func (x Parallel) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }
func (x Parallel) String() string        { return x.p.String() }

var parallelAttrNames = []string{
	"cp", "distributed_optimizer", "dp", "ep", "fsdp", "gpus", "micro_batches", "pp",
	"schedule", "sequence_parallel", "tp", "virtual_stages", "zero",
}

func (x Parallel) AttrNames() []string { return parallelAttrNames }

func (x Parallel) Attr(name string) (starlark.Value, error) {
	p := x.p
	one := func(n int64) starlark.Value { return starlark.MakeInt64(max(n, 1)) }
	switch name {
	case "dp":
		return one(p.DP), nil
	case "tp":
		return one(p.TP), nil
	case "pp":
		return one(p.PP), nil
	case "cp":
		return one(p.CP), nil
	case "ep":
		return one(p.EP), nil
	case "zero":
		return starlark.MakeInt(p.Zero), nil
	case "fsdp":
		if p.FSDP && p.FSDPVersion != 0 {
			return starlark.MakeInt(p.FSDPVersion), nil
		}
		return starlark.Bool(p.FSDP), nil
	case "sequence_parallel":
		return starlark.Bool(p.SequenceParallel), nil
	case "schedule":
		if p.Schedule == "" {
			return starlark.String("1f1b"), nil
		}
		return starlark.String(p.Schedule), nil
	case "virtual_stages":
		return one(p.VirtualStages), nil
	case "micro_batches":
		if p.MicroBatches == 0 {
			return starlark.None, nil
		}
		return starlark.MakeInt64(p.MicroBatches), nil
	case "distributed_optimizer":
		return starlark.Bool(p.DistributedOptimizer), nil
	case "gpus":
		return starlark.MakeInt64(p.GPUs()), nil
	}
	return nil, nil
}

func (x Cluster) Type() string          { return "cluster" }
func (x Cluster) Freeze()               {}
func (x Cluster) Truth() starlark.Bool  { return starlark.True }
func (x Cluster) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }

func (x Cluster) String() string {
	s := fmt.Sprintf("cluster(nodes=%d, gpus_per_node=%d", x.c.Nodes, x.c.GPUsPerNode)
	if x.c.IntraGBps > 0 {
		s += ", intra=" + strconv.FormatFloat(x.c.IntraGBps, 'g', -1, 64)
	}
	if x.c.InterGBps > 0 {
		s += ", inter=" + strconv.FormatFloat(x.c.InterGBps, 'g', -1, 64)
	}
	return s + ")"
}

var clusterAttrNames = []string{"gpus", "gpus_per_node", "inter", "intra", "nodes"}

func (x Cluster) AttrNames() []string { return clusterAttrNames }

func (x Cluster) Attr(name string) (starlark.Value, error) {
	opt := func(f float64) starlark.Value {
		if f == 0 {
			return starlark.None
		}
		return starlark.Float(f)
	}
	switch name {
	case "nodes":
		return starlark.MakeInt64(x.c.Nodes), nil
	case "gpus_per_node":
		return starlark.MakeInt64(x.c.GPUsPerNode), nil
	case "gpus":
		return starlark.MakeInt64(x.c.Nodes * x.c.GPUsPerNode), nil
	case "intra":
		return opt(x.c.IntraGBps), nil
	case "inter":
		return opt(x.c.InterGBps), nil
	}
	return nil, nil
}

func parallelBuiltins() []Builtin {
	return []Builtin{{
		Name: "cluster",
		Sig:  "cluster(nodes=1, gpus_per_node=8, intra=None, inter=None)",
		Doc: "The machines a plan runs on, for train(cluster=...): nodes of gpus_per_node GPUs. intra is " +
			"the GPU-to-GPU bandwidth inside a node (NVLink) and inter the network bandwidth per GPU between " +
			"nodes, GB/s per direction; None takes them from the GPU and a typical fabric. train() checks " +
			"that dp*tp*pp*cp of its parallel= layout equals nodes*gpus_per_node. Attributes: nodes, " +
			"gpus_per_node, gpus, intra, inter.",
		Fn: clusterFn,
	}}
}

// parallelLayoutDoc documents the layout form of parallel(), registered
// with the layer form in layers_extra.go.
const parallelLayoutDoc = "With keywords, a distributed layout for train(parallel=...): " +
	"parallel(dp=1, tp=1, pp=1, cp=1, ep=1, zero=0, fsdp=False, sequence_parallel=False, schedule=\"1f1b\", " +
	"virtual_stages=1, micro_batches=None, distributed_optimizer=False). dp data-parallel replicas (alone: " +
	"DDP, which saves no memory); zero=1/2/3 DeepSpeed ZeRO over dp (optimizer state; and gradients; and " +
	"parameters), fsdp=True PyTorch FSDP2 per repeated block, distributed_optimizer=True Megatron's sharded " +
	"optimizer; tp Megatron tensor parallelism (heads, MLP, vocabulary split; sequence_parallel shards the " +
	"rest along the sequence); pp pipeline stages of the repeated blocks, schedule \"1f1b\" or " +
	"\"interleaved\" with virtual_stages chunks per GPU, micro_batches per step (None: grad_accum; at most 2^24); cp " +
	"splits each sequence (ring attention); ep splits each MoE's experts over ranks of the dp group. " +
	"simulate() then reports one GPU (the fullest pipeline stage; all stages in r.ranks)."

// parallelOrLayer is parallel(): with positional layers, the parallel
// block of layers_extra.go; otherwise a layout.
func parallelOrLayer(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 || len(kwargs) == 0 || (len(kwargs) == 1 && string(kwargs[0][0].(starlark.String)) == "name") {
		v, err := parallelFn(thread, b, args, kwargs)
		if err != nil && len(args) == 0 {
			return nil, fmt.Errorf("%v (or keywords for a distributed layout: parallel(dp=8, zero=3))", err)
		}
		return v, err
	}
	return parallelLayoutFn(b, kwargs)
}

func parallelLayoutFn(b *starlark.Builtin, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dp, tp, pp, cp, ep, zero, vs, mb, schedule, fsdp starlark.Value
	var sp, do bool
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "dp?", &dp, "tp?", &tp, "pp?", &pp, "cp?", &cp,
		"ep?", &ep, "zero?", &zero, "fsdp?", &fsdp, "sequence_parallel?", &sp, "schedule?", &schedule,
		"virtual_stages?", &vs, "micro_batches?", &mb, "distributed_optimizer?", &do); err != nil {
		return nil, err
	}
	p := sim.Parallelism{SequenceParallel: sp, DistributedOptimizer: do}
	switch f := fsdp.(type) {
	case nil, starlark.NoneType:
	case starlark.Bool:
		p.FSDP = bool(f)
	case starlark.Int:
		v, ok := f.Int64()
		if !ok || (v != 1 && v != 2) {
			return nil, fmt.Errorf("fsdp must be True, False, 1 (FullyShardedDataParallel) or 2 (fully_shard) (got %s)", f)
		}
		p.FSDP, p.FSDPVersion = true, int(v)
	default:
		return nil, fmt.Errorf("fsdp must be True, False, 1 or 2 (got %s)", f.Type())
	}
	for _, d := range []struct {
		v    starlark.Value
		what string
		dst  *int64
	}{{dp, "dp", &p.DP}, {tp, "tp", &p.TP}, {pp, "pp", &p.PP}, {cp, "cp", &p.CP}, {ep, "ep", &p.EP},
		{vs, "virtual_stages", &p.VirtualStages}, {mb, "micro_batches", &p.MicroBatches}} {
		n, err := optInt(d.v, d.what, 0)
		if err != nil {
			return nil, err
		}
		if d.v != nil && d.v != starlark.None && n < 1 {
			return nil, fmt.Errorf("%s must be at least 1 (got %d)", d.what, n)
		}
		*d.dst = n
	}
	z, err := optInt(zero, "zero", 0)
	if err != nil {
		return nil, err
	}
	if z < 0 || z > 3 {
		return nil, withHint(fmt.Errorf("zero must be 0, 1, 2 or 3 (got %d)", z), "ZeRO stages: 1 shards optimizer state, 2 also gradients, 3 also parameters")
	}
	p.Zero = int(z)
	switch s := schedule.(type) {
	case nil, starlark.NoneType:
	case starlark.String:
		switch string(s) {
		case "1f1b", "interleaved":
			p.Schedule = string(s)
		default:
			return nil, withHint(fmt.Errorf("unknown schedule %q (known: 1f1b, interleaved)", string(s)), didYouMean(string(s), []string{"1f1b", "interleaved"}))
		}
	default:
		return nil, fmt.Errorf("schedule must be a string (got %s)", s.Type())
	}
	if p.Schedule == "interleaved" && p.VirtualStages < 2 {
		return nil, fmt.Errorf("the interleaved schedule needs virtual_stages >= 2 (model chunks per GPU)")
	}
	if p.FSDP && p.Zero > 0 {
		return nil, fmt.Errorf("fsdp=True and zero=%d are alternatives (FSDP full sharding is ZeRO-3's design in PyTorch)", p.Zero)
	}
	if p.DistributedOptimizer && (p.FSDP || p.Zero > 0) {
		return nil, fmt.Errorf("distributed_optimizer=True is Megatron's sharding of optimizer state; it cannot be combined with zero= or fsdp=")
	}
	return Parallel{p}, nil
}

func clusterFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var nodes, gpn, intra, inter starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "nodes?", &nodes, "gpus_per_node?", &gpn, "intra?", &intra, "inter?", &inter); err != nil {
		return nil, err
	}
	c := sim.Cluster{}
	var err error
	if c.Nodes, err = optInt(nodes, "nodes", 1); err != nil {
		return nil, err
	}
	if c.GPUsPerNode, err = optInt(gpn, "gpus_per_node", 8); err != nil {
		return nil, err
	}
	if c.Nodes < 1 || c.GPUsPerNode < 1 {
		return nil, fmt.Errorf("nodes and gpus_per_node must be at least 1 (got nodes=%d, gpus_per_node=%d)", c.Nodes, c.GPUsPerNode)
	}
	for _, f := range []struct {
		v    starlark.Value
		what string
		dst  *float64
	}{{intra, "intra", &c.IntraGBps}, {inter, "inter", &c.InterGBps}} {
		if f.v == nil || f.v == starlark.None {
			continue
		}
		x, err := AsFloat(f.v, f.what)
		if err != nil {
			return nil, err
		}
		if x <= 0 {
			return nil, fmt.Errorf("%s must be a positive bandwidth in GB/s (got %s)", f.what, strconv.FormatFloat(x, 'g', -1, 64))
		}
		*f.dst = x
	}
	return Cluster{c}, nil
}

// resolveLayout reads train()'s parallel= and cluster= into the plan.
func resolveLayout(v *[numTrainArgs]starlark.Value, p *sim.Plan) error {
	switch x := v[argParallel].(type) {
	case starlark.NoneType:
	case Parallel:
		p.Parallel = x.p
	default:
		return fmt.Errorf("parallel must be None or parallel(dp=..., tp=..., ...) (got %s)", x.Type())
	}
	switch x := v[argCluster].(type) {
	case starlark.NoneType:
	case Cluster:
		p.Cluster = x.c
	default:
		return fmt.Errorf("cluster must be None or cluster(nodes=..., gpus_per_node=...) (got %s)", x.Type())
	}
	return nil
}

// collectives is r.collectives: bytes passed to collectives per step, by
// kind (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv).
func collectives(r *sim.Report) starlark.Value {
	d := starlark.NewDict(len(r.CommBytes))
	for _, c := range r.CommBytes {
		_ = d.SetKey(starlark.String(c.Name), starlark.MakeInt64(c.Bytes))
	}
	d.Freeze()
	return d
}
