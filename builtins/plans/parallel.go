package plans

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Parallel is the Starlark value of a distributed layout (type
// "parallel"), from parallel(dp=..., tp=..., ...), for train(parallel=).
type Parallel struct{ P core.Parallelism }

// Cluster is the Starlark value of the machines a plan runs on (type
// "cluster"), from cluster(...), for train(cluster=).
type Cluster struct{ C hw.Cluster }

var (
	_ starlark.HasAttrs = Parallel{}
	_ starlark.HasAttrs = Cluster{}
)

// SimParallelism is the wrapped layout.
func (x Parallel) SimParallelism() core.Parallelism { return x.P }

// SimCluster is the wrapped cluster.
func (x Cluster) SimCluster() hw.Cluster { return x.C }

func (x Parallel) Type() string          { return "parallel" }
func (x Parallel) Freeze()               {}
func (x Parallel) Truth() starlark.Bool  { return starlark.True }
func (x Parallel) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }
func (x Parallel) String() string        { return x.P.String() }

// CompareSameType: two layouts are equal when they print the same
// parallel() call, which names every keyword set away from its default
// (TestParallelStringIsTheCall).
func (x Parallel) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	return compareEqual(op, x.String() == y.(Parallel).String(), "layouts")
}

func (x Parallel) AttrNames() []string {
	names := make([]string, 0, len(layoutKeywords)+1)
	for _, k := range layoutKeywords {
		names = append(names, k.Name)
	}
	names = append(names, "gpus")
	sort.Strings(names)
	return names
}

// Attr is a layout keyword's value (the default when unset), or gpus.
func (x Parallel) Attr(name string) (starlark.Value, error) {
	if name == "gpus" {
		return starlark.MakeInt64(x.P.GPUs()), nil
	}
	for _, k := range layoutKeywords {
		if k.Name == name {
			return k.get(x.P), nil
		}
	}
	return nil, nil
}

func (x Cluster) Type() string          { return "cluster" }
func (x Cluster) Freeze()               {}
func (x Cluster) Truth() starlark.Bool  { return starlark.True }
func (x Cluster) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }

func (x Cluster) String() string {
	s := fmt.Sprintf("cluster(nodes=%d, gpus_per_node=%d", x.C.Nodes, x.C.GPUsPerNode)
	if x.C.IntraGBps > 0 {
		s += ", intra=" + strconv.FormatFloat(x.C.IntraGBps, 'g', -1, 64)
	}
	if x.C.InterGBps > 0 {
		s += ", inter=" + strconv.FormatFloat(x.C.InterGBps, 'g', -1, 64)
	}
	if x.C.HostGBps > 0 {
		s += ", host=" + strconv.FormatFloat(x.C.HostGBps, 'g', -1, 64)
	}
	if x.C.NVMeReadGBps > 0 {
		s += ", nvme_read=" + strconv.FormatFloat(x.C.NVMeReadGBps, 'g', -1, 64)
	}
	if x.C.NVMeWriteGBps > 0 {
		s += ", nvme_write=" + strconv.FormatFloat(x.C.NVMeWriteGBps, 'g', -1, 64)
	}
	return s + ")"
}

var clusterAttrNames = []string{"gpus", "gpus_per_node", "host", "inter", "intra", "nodes", "nvme_read", "nvme_write"}

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
		return starlark.MakeInt64(x.C.Nodes), nil
	case "gpus_per_node":
		return starlark.MakeInt64(x.C.GPUsPerNode), nil
	case "gpus":
		return starlark.MakeInt64(x.C.Nodes * x.C.GPUsPerNode), nil
	case "intra":
		return opt(x.C.IntraGBps), nil
	case "inter":
		return opt(x.C.InterGBps), nil
	case "host":
		return opt(x.C.HostGBps), nil
	case "nvme_read":
		return opt(x.C.NVMeReadGBps), nil
	case "nvme_write":
		return opt(x.C.NVMeWriteGBps), nil
	}
	return nil, nil
}

func ParallelBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "parallel",
			Sig:  "parallel(*branches, name=None, " + layoutSig() + ")",
			Doc: "Two uses: with keywords, a distributed layout for train(parallel=...), parallel(dp=8, zero=3); with " +
				"layers, a block that feeds one input to every branch and sums their outputs. The block is the parallel " +
				"attention and MLP of GPT-NeoX, GPT-J and Falcon, written residual(parallel(attn_branch, mlp_branch)). " +
				parallelLayoutDoc(),
			Fn: parallelOrLayer, // layers give the block, keywords a layout
		}, {
			Name: "cluster",
			Sig:  "cluster(nodes=1, gpus_per_node=8, intra=None, inter=None, host=None, nvme_read=None, nvme_write=None)",
			Doc: "The machines a plan runs on, for train(cluster=...): nodes of gpus_per_node GPUs. intra is " +
				"the GPU-to-GPU bandwidth inside a node (NVLink) and inter the network bandwidth per GPU between " +
				"nodes, GB/s per direction; None takes them from the GPU and a typical fabric. host is the host " +
				"memory bandwidth of one node in GB/s, shared by its GPUs: ZeRO-Offload's CPU optimizer step " +
				"(offload(optimizer=\"cpu\"), cpu_optimizer in r.time_breakdown) streams 34 bytes per element of each " +
				"rank's partition through it (bf16 or fp16; DeepSpeedCPUAdam), FSDP2's CPU offload 80 (torch's AdamW). None is the " +
				"peak of the host memory of the GPU's reference system (sockets x channels x MT/s x 8 B; the sources in " +
				"sim/hw/host.go), by GPU: " + hostDefaults() + "; a custom gpu() takes " +
				strconv.FormatFloat(hw.DefaultHostGBps, 'g', -1, 64) + " (a DGX H100's). A peak is a bound a CPU kernel does " +
				"not reach: give a measured figure (STREAM) for a real host. nvme_read and nvme_write are the node's local NVMe rates in GB/s, " +
				"shared by its GPUs: ZeRO-Infinity (parallel(zero=3) with offload(optimizer=\"nvme\") or params=\"nvme\") reads and writes " +
				"its swap files there, nvme in r.time_breakdown; None takes " + nvmeDefault() + ". train() checks that dp*tp*pp*cp of its parallel= layout equals " +
				"nodes*gpus_per_node. Attributes: nodes, gpus_per_node, gpus, intra, inter, host, nvme_read, nvme_write.",
			Fn: ClusterFn,
		}}
}

// nvmeDefault says hw.DefaultNVMe's rates and where they come from.
func nvmeDefault() string {
	d := hw.DefaultNVMe
	return strconv.FormatFloat(d.ReadGBps, 'g', -1, 64) + " and " + strconv.FormatFloat(d.WriteGBps, 'g', -1, 64) +
		" for every GPU (" + d.Source + "; sim/hw/nvme.go)"
}

// hostDefaults lists the catalog GPUs' default host bandwidths with their
// reference systems, for cluster()'s doc.
func hostDefaults() string {
	var parts []string
	for _, d := range hw.Catalog() {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", d.Name, strconv.FormatFloat(d.Host.GBps(), 'f', -1, 64), d.Host.System))
	}
	return strings.Join(parts, ", ")
}

// parallelLayoutDoc documents the layout form of parallel(), registered
// with the layer form in layers_extra.go.
func parallelLayoutDoc() string {
	return "With keywords, a distributed layout for train(parallel=...): parallel(" + layoutSig() + "). " +
		"simulate() then reports one GPU (the fullest pipeline stage; all stages in r.ranks); the layout's " +
		"attributes are its keywords and gpus (dp*tp*pp*cp). A layout prints as the parallel() call that builds it, " +
		"defaults left out, and two layouts are equal (==, dict keys, in) when they print the same call.\n\nKeywords:" + layoutDoc()
}

// parallelOrLayer is parallel(): with positional layers, the parallel
// block of layers_extra.go; otherwise a layout.
func parallelOrLayer(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 || len(kwargs) == 0 || (len(kwargs) == 1 && string(kwargs[0][0].(starlark.String)) == "name") {
		v, err := models.ParallelFn(thread, b, args, kwargs)
		if err != nil && len(args) == 0 {
			return nil, fmt.Errorf("%v (or keywords for a distributed layout: parallel(dp=8, zero=3))", err)
		}
		return v, err
	}
	return ParallelLayoutFn(b, kwargs)
}

func ClusterFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var nodes, gpn, intra, inter, hostBW, nvmeRead, nvmeWrite starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "nodes?", &nodes, "gpus_per_node?", &gpn, "intra?", &intra, "inter?", &inter, "host?", &hostBW,
		"nvme_read?", &nvmeRead, "nvme_write?", &nvmeWrite); err != nil {
		return nil, err
	}
	c := hw.Cluster{}
	var err error
	if c.Nodes, err = models.OptInt(nodes, "nodes", 1); err != nil {
		return nil, err
	}
	if c.GPUsPerNode, err = models.OptInt(gpn, "gpus_per_node", 8); err != nil {
		return nil, err
	}
	if c.Nodes < 1 || c.GPUsPerNode < 1 {
		return nil, fmt.Errorf("nodes and gpus_per_node must be at least 1 (got nodes=%d, gpus_per_node=%d)", c.Nodes, c.GPUsPerNode)
	}
	for _, f := range []struct {
		v    starlark.Value
		what string
		dst  *float64
	}{{intra, "intra", &c.IntraGBps}, {inter, "inter", &c.InterGBps}, {hostBW, "host", &c.HostGBps},
		{nvmeRead, "nvme_read", &c.NVMeReadGBps}, {nvmeWrite, "nvme_write", &c.NVMeWriteGBps}} {
		if f.v == nil || f.v == starlark.None {
			continue
		}
		x, err := host.AsFloat(f.v, f.what)
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

// collectives is r.collectives: bytes passed to collectives per step, by
// kind (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv).
func Collectives(r *replay.Report) starlark.Value {
	d := starlark.NewDict(len(r.CommBytes))
	for _, c := range r.CommBytes {
		_ = d.SetKey(starlark.String(c.Name), starlark.MakeInt64(c.Bytes))
	}
	d.Freeze()
	return d
}
