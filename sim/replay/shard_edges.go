package replay

import (
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// ShardEdges are the collectives of a micro-batch FSDP and ZeRO-3 cannot
// overlap with compute, in bytes (the message sizes, as CommRecord's):
//
//   - RootGather: under FSDP the root unit's all-gather. The root's
//     pre-forward runs at the model's forward entry, before any block's,
//     and waits for its parameters: nothing is queued before it to overlap
//     (torch 2.15 _fsdp_state.py _pre_forward on the root; FSDP1's root
//     _pre_forward). Under ZeRO-3 the modules outside the blocks: the
//     embedding's fetch opens the forward, the head's the backward, each
//     waited for by the first op of its pass (the ones it keeps gathered
//     below stage3_param_persistence_threshold aside).
//   - RootScatter: under FSDP the root unit's reduce-scatter of its
//     trainable gradients. FSDP2 runs the root's post-backward in the
//     final backward callback (_root_post_backward_final_callback: the
//     root's forward inputs, token ids, carry no gradient to trigger it
//     earlier), after every block's backward; FSDP1's fires when the
//     root's flat parameter has its gradient, the embedding's, the
//     backward's last. Under ZeRO-3 the reduce bucket its backward's
//     epilogue flushes (independent_gradient_partition_epilogue), at most
//     reduce_bucket_size elements: an upper bound, the last bucket's fill
//     is not tracked. The optimizer step waits for either.
//   - RefGather: DPO's reference copy under FSDP2, one unit of its own
//     (its own root: unitKey) gathered whole at its forward's start, after
//     the policy's forward has been queued.
//
// The other units' gathers and reduce-scatters are prefetched and
// overlapped (sim/timing/comm.go). Zero under other modes, and under a
// pipeline (FSDP2's stages gather once a step, pipeHold; a stage holds no
// model entry and exit of its own), where the search's stand-in program
// knows the plan's degree alone.
type ShardEdges struct {
	RootGather, RootScatter, RefGather int64
}

// ShardEdges is d's (nil-safe): a program's root unit as its units place
// it, a stand-in's (the search's) by its parameters' names.
func (d *distState) ShardEdges() ShardEdges {
	var e ShardEdges
	zero3 := d != nil && d.Mode == DistZeRO && d.Par.Zero == 3
	if d == nil || (d.Mode != DistFSDP && !zero3) || d.pipeHold || d.Par.PP > 1 || d.dp <= 1 {
		return e
	}
	var trained int64
	for _, trainable := range []bool{true, false} {
		for _, g := range d.groups(trainable) {
			if g.n <= 1 {
				continue
			}
			rn, rf := d.rootNumel(g)
			e.RootGather += d.gatherDT.Bytes(rn-rf) + units.FP8.Bytes(rf)
			switch {
			case trainable && zero3:
				n, _ := d.gatheredNumel(g)
				trained += n
			case trainable:
				e.RootScatter += d.reduceDT.Bytes(rn)
			case d.Mode == DistFSDP:
				e.RefGather += d.gatherDT.Bytes(d.refNumel(g))
			}
		}
	}
	if zero3 {
		e.RootScatter = d.reduceDT.Bytes(min(trained, d.zs.ReduceBucket))
	}
	return e
}

// atEdge reports whether parameter p is gathered at the edge of a pass
// (ShardEdges): in FSDP's root unit (unitKey), or under ZeRO-3 in a
// module outside the blocks (the embedding, whose fetch opens the
// forward; the head, whose fetch opens the backward) that ZeRO-3 does not
// keep gathered (stage3_param_persistence_threshold). d.blocks must be
// set.
func (d *distState) atEdge(p *core.ParamInfo) bool {
	_, outside := fsdpUnit(p.Name, d.blocks)
	return edgeOf(d.Mode, d.adapterUnits(), d.zs.Persistence, p, outside)
}

// edgeOf is atEdge's rule, given whether p's name lies outside every
// block and fsdp_units (fsdpUnit's root) and whether FSDP1 wraps the
// adapters on their own (adapterUnits, as unitKey places them).
func edgeOf(mode DistMode, adapterUnits bool, persistence int64, p *core.ParamInfo, outside bool) bool {
	if !outside || p.Reference {
		return false
	}
	if mode == DistFSDP {
		return !(adapterUnits && p.Role == core.RoleLoRA)
	}
	return p.Numel >= persistence
}

// EdgeClassifier reports for parameters whether they are gathered at a
// pass's edge (atEdge) were a plan to shard with FSDP (its root unit) and
// with ZeRO-3, whatever the plan's own sharding, from their names, roles
// and sizes and the plan's blocks alone: the search's profiles, which
// replay no program and serve layouts of several shardings. It works out
// a model's blocks once and places each name once (a profile's programs
// lower the same names again and again). Not safe for concurrent use.
type EdgeClassifier struct {
	model   *core.Model
	units   []string
	blocks  map[string]int
	outside map[string]bool // by parameter name: fsdpUnit's root
}

// ready works out plan's blocks, unless c holds its model's.
func (c *EdgeClassifier) ready(plan *core.Plan, par core.Parallelism) {
	if c.blocks == nil || c.model != plan.Model || !slices.Equal(c.units, par.FSDPUnits) {
		d := &distState{Par: par, plan: plan}
		c.model, c.units, c.blocks, c.outside = plan.Model, slices.Clone(par.FSDPUnits), d.fsdpBlocks(), map[string]bool{}
	}
}

// FSDP1Folded reports for each parameter of ps no op reads
// (core.ParamInfo.Unread) whether FSDP1 flattens it into a unit that
// runs, one holding a parameter of ps an op reads, and so gathers it
// (fsdp1FoldIdle): a tower's patch embedding in the root unit, not a
// tower's layer. nil when every parameter is read.
func (c *EdgeClassifier) FSDP1Folded(plan *core.Plan, ps []core.ParamInfo) []bool {
	if !slices.ContainsFunc(ps, func(p core.ParamInfo) bool { return p.Unread }) {
		return nil
	}
	par := plan.Parallel.Norm()
	c.ready(plan, par)
	f := &distState{Par: par, plan: plan, p: &core.Program{}, Mode: DistFSDP, fsdp1: true}
	running := map[string]bool{}
	for i := range ps {
		if !ps[i].Unread {
			k, _ := f.unitKey(&ps[i], c.blocks)
			running[k] = true
		}
	}
	folded := make([]bool, len(ps))
	for i := range ps {
		if p := &ps[i]; p.Unread && p.TiedTo < 0 && p.Quant == "" {
			k, _ := f.unitKey(p, c.blocks)
			folded[i] = running[k]
		}
	}
	return folded
}

// Params is the classification of ps under plan: FSDP's and ZeRO-3's.
func (c *EdgeClassifier) Params(plan *core.Plan, ps []core.ParamInfo) (fsdp, zero3 []bool) {
	par := plan.Parallel.Norm()
	c.ready(plan, par)
	f := &distState{Par: par, plan: plan, fsdp1: par.FSDPVersion == 1}
	adapters, persistence := f.adapterUnits(), plan.ZeroSizes().Persistence
	fsdp, zero3 = make([]bool, len(ps)), make([]bool, len(ps))
	for i := range ps {
		p := &ps[i]
		out, ok := c.outside[p.Name]
		if !ok {
			_, out = fsdpUnit(p.Name, c.blocks)
			c.outside[p.Name] = out
		}
		fsdp[i], zero3[i] = edgeOf(DistFSDP, adapters, 0, p, out), edgeOf(DistZeRO, false, persistence, p, out)
	}
	return fsdp, zero3
}
