package replay

import (
	"github.com/memsh/memsh/sim/core"
)

// FSDP1's construction from a model on the host (or the meta device):
// what FullyShardedDataParallel(module, auto_wrap_policy=...,
// device_id=...) allocates on the GPU while it wraps, and leaves in the
// caching allocator's cache. Read from pytorch/pytorch's
// torch/distributed/fsdp/_init_utils.py (torch 2.2:
// _init_param_handle_from_module, _move_module_to_device,
// _sync_module_params_and_buffers, _init_param_handle_from_params),
// _flat_param.py (FlatParamHandle.flatten_tensors_into_flat_param,
// shard, _get_shard) and torch/csrc/distributed/c10d/comm.cpp
// (broadcast_coalesced). The auto-wrap policy wraps the innermost
// modules first and the root last; for each unit, in that order:
//
//   - _move_module_to_device moves the unit's parameters that are on the
//     host to the GPU, one tensor each (param.data = param.to(device));
//     a rank that made them on the meta device materialises them there
//     (param_init_fn's to_empty), the same bytes;
//   - with sync_module_states, _sync_params_and_buffers broadcasts them
//     from rank 0 in buckets of 250 MiB (PARAM_BROADCAST_BUCKET_SIZE,
//     a bucket closes once it reaches the size), at most two in flight;
//     a bucket of several tensors is flattened into a copy
//     (flatten_dense_tensors, a view for a single tensor) that lives
//     until its broadcast finishes;
//   - FlatParamHandle flattens them into one padded FlatParameter
//     (torch.cat), shard() clones this rank's chunk and set_() drops the
//     unsharded storage; under CPUOffload the shard is then moved to the
//     host (flat_param_to(cpu));
//   - the original tensors, still referenced by managed_params, are
//     freed when _init_param_handle_from_module returns.
//
// None of it is live when training starts, but nothing empties the
// cache in between unless the script does (train.py of Answer.AI's
// fsdp_qlora calls torch.cuda.empty_cache() after loading, before the
// wrap, and resets only the peak statistics after it): the segments
// count in reserved memory and nvidia-smi, and the step's tensors are
// carved from them first.

// fsdp1BroadcastBucket is PARAM_BROADCAST_BUCKET_SIZE (_init_utils.py).
const fsdp1BroadcastBucket = 250 << 20

// fsdp1WrapOrder is the order FSDP's auto-wrap constructs the units in:
// every unit before the root, in module order, the root last.
func (d *distState) fsdp1WrapOrder() []int32 {
	out := make([]int32, 0, len(d.units))
	var roots []int32
	for u := range d.units {
		if d.units[u].root {
			roots = append(roots, int32(u))
			continue
		}
		out = append(out, int32(u))
	}
	return append(out, roots...)
}

// fsdp1Wrap replays unit u's construction and returns its GPU shard,
// none under CPU offload.
func (d *distState) fsdp1Wrap(r *Replay, u int32) int32 {
	un := &d.units[u]
	dt := r.Plan.Precision.Params
	offload := d.FsdpOffload(r)
	orig := make([]int32, 0, len(un.params))
	for _, pi := range un.params {
		n := d.elems(pi)
		orig = append(orig, d.alloc(r, d.p.Params[pi].Name+" (wrap)", []int64{n}, dt, dt.Bytes(n), core.CatParams,
			"moved to the GPU by FSDP's _move_module_to_device while "+un.name+" is wrapped"))
	}
	if r.Plan.Parallel.SyncStates {
		d.fsdp1Broadcast(r, un)
	}
	n := d.gatheredSize(u)
	flat := d.alloc(r, un.name+" FlatParameter (wrap)", []int64{n}, dt, dt.Bytes(n), core.CatParams,
		"the unsharded FlatParameter of "+un.name+" (FlatParamHandle: torch.cat of its parameters)")
	name, why := un.name+" flat shard", "this rank's shard of the FlatParameter of "+un.name+" (FSDP1)"
	if offload {
		name, why = name+" (wrap)", "this rank's shard of the FlatParameter of "+un.name+", cloned by shard() and moved to the host (CPUOffload)"
	}
	s := n / d.dp
	shard := d.alloc(r, name, []int64{s}, dt, dt.Bytes(s), core.CatParams, why)
	r.release(flat)
	if offload {
		r.release(shard)
		shard = none
	}
	for _, id := range orig {
		r.release(id)
	}
	return shard
}

// fsdp1Broadcast is sync_module_states' broadcast_coalesced of unit un's
// parameters: buckets of fsdp1BroadcastBucket bytes, each of several
// tensors flattened into a copy, two in flight.
func (d *distState) fsdp1Broadcast(r *Replay, un *gatherUnit) {
	dt := r.Plan.Precision.Params
	var inFlight []int32
	var cur, count int64
	flush := func() {
		if count == 0 {
			return
		}
		if len(inFlight) == 2 { // the oldest finishes first
			if inFlight[0] != none {
				r.release(inFlight[0])
			}
			inFlight = inFlight[1:]
		}
		var id int32 = none // a single tensor is broadcast as a view
		if count > 1 {
			id = d.alloc(r, un.name+" broadcast bucket (wrap)", []int64{cur / dt.Bytes(1)}, dt, cur, core.CatComm,
				"sync_module_states: a bucket of "+un.name+"'s parameters flattened for the broadcast from rank 0 (broadcast_coalesced)")
		}
		inFlight = append(inFlight, id)
		cur, count = 0, 0
	}
	for _, pi := range un.params {
		cur += dt.Bytes(d.elems(pi))
		count++
		if cur >= fsdp1BroadcastBucket {
			flush()
		}
	}
	flush()
	for _, id := range inFlight {
		if id != none {
			r.release(id)
		}
	}
}

// fsdp1WrapDone starts the peak of allocated memory again from what the
// wrap kept: its transient tensors are construction's, not the step's
// (train.py calls reset_peak_memory_stats before its loop). The reserve
// it grew stays, as the caching allocator keeps it.
func (d *distState) fsdp1WrapDone(r *Replay) {
	r.allocatedPeak(r.alloc.Allocated)
}
