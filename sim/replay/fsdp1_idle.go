package replay

import (
	"slices"

	"github.com/memsh/memsh/sim/core"
)

// FSDP1's parameters no op of the step reads: a tower the step does not
// run (a vision tower without images, Gemma 4's audio tower). Gather units
// are made from the ops that read parameters (buildUnits);
// FullyShardedDataParallel flattens every parameter of the modules it
// wraps into their unit's FlatParameter, run or not
// (FlatParamHandle._init_flat_param_and_metadata over the module's
// parameters, torch/distributed/fsdp/_flat_param.py at fe03cf693c). One
// that falls in a unit the step runs is part of what the unit's unshard
// all-gathers, the padded unsharded FlatParameter whole
// (_alloc_padded_unsharded_flat_param: _padded_unsharded_size), of its
// flat gradient, and of the parameters the wrap moves to the GPU
// (fsdp1FoldIdle): the tower's patch embedding and merger in the root, an
// expert no token chose in its decoder layer. One in a unit that never
// runs is only a shard each rank holds (fsdp1IdleShards).
//
// With flat parameters (use_orig_params=False) the optimizer steps the
// FlatParameters: a unit's flat parameter gets a gradient when any of its
// parameters does (the post-backward hook of a handle that ran; the
// gradient covers the whole flat parameter), and none when the unit never
// runs (its hooks never fire: flat_param.grad stays None, and torch.optim
// skips it: stateless). So a parameter no op reads that falls in a unit
// that runs (the root: a tower's patch embedding and merger outside its
// wrapped layers) shares that unit's optimizer state; one in a unit of its
// own (a tower's layer) has none.

// fsdp1FoldIdle adds each parameter no op reads to the unit it falls in
// (key: the units by name) when that unit runs: its FlatParameter's
// elements (numel), its requires_grad (the logical OR over the flat
// parameter's parameters) and its wrap (idle).
func (d *distState) fsdp1FoldIdle(key map[string]int32, blocks map[string]int) {
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if d.unitOf[pi] != none || p.TiedTo >= 0 || p.Quant != "" {
			continue
		}
		k, _ := fsdpUnit(p.Name, blocks)
		u, ok := key[k]
		if !ok {
			continue
		}
		un := &d.units[u]
		d.unitOf[pi] = u
		un.idle = append(un.idle, int32(pi))
		un.numel += d.elems(int32(pi))
		un.trainable = un.trainable || p.Trainable
	}
}

// fsdp1IdleShards allocates the flat shards of the parameters no op
// reads in units that never run, one per unit, and reports by parameter
// whether it is in such a unit (no gradient, no optimizer state); those of
// units that run are in their units' shards (fsdp1FoldIdle).
func (d *distState) fsdp1IdleShards(r *Replay) []bool {
	blocks := d.fsdpBlocks()
	running := map[string]bool{}
	for u := range d.units {
		running[d.units[u].name] = d.units[u].trainable
	}
	shards := map[string]int64{}
	var keys []string
	idle := make([]bool, len(d.p.Params))
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if d.unitOf[pi] != none || p.TiedTo >= 0 || p.Quant != "" {
			continue
		}
		k, root := fsdpUnit(p.Name, blocks)
		if !root && !running[k] {
			idle[pi] = true
		}
		if _, ok := shards[k]; !ok {
			keys = append(keys, k)
		}
		shards[k] += ceilDiv(p.Numel, d.Degree(int32(pi)))
	}
	slices.Sort(keys)
	dt := r.Plan.Precision.Params
	for _, k := range keys {
		b := dt.Bytes(shards[k])
		r.Rep.States.Params += b
		if d.FsdpOffload(r) {
			d.hostFlatShard(r, b)
			continue
		}
		d.alloc(r, k+" flat shard (never run)", []int64{shards[k]}, dt, b, core.CatParams,
			"this rank's shard of the FlatParameter parts of "+k+" that no op of the step reads (FSDP1 flattens every wrapped module)")
	}
	return idle
}
