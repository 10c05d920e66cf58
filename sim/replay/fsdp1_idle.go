package replay

import (
	"slices"

	"github.com/memsh/memsh/sim/core"
)

// FSDP1's parameters no op of the step reads: a tower the step does not
// run (a vision tower without images, Gemma 4's audio tower). Gather units
// are made from the ops that read parameters (buildUnits), so these are in
// none; FullyShardedDataParallel flattens every module it wraps whether it
// runs or not, so each rank holds their shards all the same.
//
// With flat parameters (use_orig_params=False) the optimizer steps the
// FlatParameters: a unit's flat parameter gets a gradient when any of its
// parameters does (the post-backward hook of a handle that ran; the
// gradient covers the whole flat parameter), and none when the unit never
// runs (its hooks never fire: flat_param.grad stays None, and torch.optim
// skips it: stateless). So a parameter no op reads that falls in a unit
// that runs (the root: a tower's patch embedding and merger outside its
// wrapped layers) shares that unit's optimizer state; one in a unit of its
// own (a tower's layer) has none. Not modelled: the idle parameters' share
// of the root's all-gather (the gathered root unit holds only the
// parameters ops read) and the wrap's transient copies of theirs.

// fsdp1IdleShards allocates the flat shards of the parameters no op
// reads, one per unit they fall in, and reports by parameter whether it is
// in a unit that never runs (no gradient, no optimizer state).
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
