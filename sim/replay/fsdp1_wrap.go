package replay

import (
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
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
//     host to the GPU, one tensor each (param.data = param.to(device)),
//     then its module buffers (fsdp1Buffers); a rank that made them on
//     the meta device materialises them there (param_init_fn's
//     to_empty), the same bytes;
//   - with sync_module_states, _sync_params_and_buffers broadcasts the
//     buffers and then the parameters from rank 0 in buckets of 250 MiB
//     per dtype (PARAM_BROADCAST_BUCKET_SIZE, a bucket closes once it
//     reaches the size), at most two in flight; a bucket of several
//     tensors is flattened into a copy (flatten_dense_tensors, a view
//     for a single tensor) that lives until its broadcast finishes, and
//     on a runtime that records streams until the host next waits for
//     the device (fsdp1Broadcast);
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
// _recursive_wrap (torch/distributed/fsdp/wrap.py) wraps a module's
// children before the module, so a unit nested in another (an adapter in
// its decoder layer) comes before it; otherwise module order, the root
// last.
func (d *distState) fsdp1WrapOrder() []int32 {
	out := make([]int32, 0, len(d.units))
	var roots []int32
	var open []int32 // units whose nested units may still follow, outermost first
	for u := range d.units {
		un := &d.units[u]
		if un.root {
			roots = append(roots, int32(u))
			continue
		}
		for len(open) > 0 && !strings.HasPrefix(un.name, d.units[open[len(open)-1]].name+".") {
			out = append(out, open[len(open)-1])
			open = open[:len(open)-1]
		}
		open = append(open, int32(u))
	}
	for len(open) > 0 {
		out = append(out, open[len(open)-1])
		open = open[:len(open)-1]
	}
	return append(out, roots...)
}

// fsdp1Wrap replays unit u's construction with the module buffers bufs
// (indices in the program's Buffers) it moves, and returns its GPU shard,
// none under CPU offload.
//
// Rank 0, whose figures a run's logs report, moves the unit from the host:
// param.to(device) copies from pageable memory, and a copy that is not
// non_blocking ends with cudaStreamSynchronize (memcpy_and_sync in
// aten/src/ATen/native/cuda/Copy.cu), so the host waits there for the
// device, the earlier units' broadcasts included (fsdp1Broadcast).
func (d *distState) fsdp1Wrap(r *Replay, u int32, bufs []int) int32 {
	un := &d.units[u]
	dt := r.Plan.Precision.Params
	offload := d.FsdpOffload(r)
	moved := slices.Concat(un.params, un.idle)                   // _move_module_to_device moves every parameter of the unit, read or not
	states := make([]wrapState, len(bufs), len(bufs)+len(moved)) // module_states: the buffers, then the parameters
	orig := make([]int32, 0, len(moved))
	for i, pi := range moved {
		n := d.elems(pi)
		if d.quantRoundTrip(r, pi) { // Params4bit.to: the quant_state, then the codes
			d.quantWholeIf(r, pi, quantMoved, false, nil)
		}
		id := d.alloc(r, d.p.Params[pi].Name+" (wrap)", []int64{n}, dt, dt.Bytes(n), core.CatParams,
			"moved to the GPU by FSDP's _move_module_to_device while "+un.name+" is wrapped")
		orig = append(orig, id)
		states = append(states, wrapState{id: id, bytes: dt.Bytes(n), dt: dt})
		if i == 0 {
			d.wrapHostWaited(r)
		}
	}
	for j, bi := range bufs { // _move_states_to_device moves the buffers after the parameters
		id, n := r.setupBuffer(bi)
		states[j] = wrapState{id: id, bytes: n, dt: d.p.Buffers[bi].Dtype}
	}
	if r.Plan.Parallel.SyncStates {
		d.fsdp1Broadcast(r, un, states)
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
	if offload { // flat_param_to(cpu): the copy to pageable memory waits for the device
		d.wrapHostWaited(r)
		r.release(shard)
		shard = none
	}
	for _, id := range orig {
		r.release(id)
	}
	return shard
}

// wrapState is one tensor of a unit's module_states.
type wrapState struct {
	id    int32
	bytes int64
	dt    units.DType
}

// fsdp1Broadcast is sync_module_states' broadcast_coalesced of unit un's
// states (broadcastBuckets), at most two buckets in flight: a bucket of
// several tensors is flattened into a copy that lives until its broadcast
// finishes, a single tensor is broadcast as a view of itself.
//
// Before TORCH_NCCL_AVOID_RECORD_STREAMS became PyTorch's default
// (core.Runtime.NCCLRecordStreams), ProcessGroupNCCL's collective()
// records the broadcast's input on its NCCL stream (nccl_record.go), and
// BroadcastWork.finish()'s work.wait() only makes the current stream wait:
// the host goes on. The copy, freed at the end of broadcast_coalesced, and
// a parameter broadcast as itself, freed when the unit is wrapped, wait
// in the cache until the host next waits for the device, at the next
// unit's first copy from the host (fsdp1Wrap) or after the wrap
// (fsdp1WrapDone): FlatParamHandle's torch.cat and shard()'s clone cannot
// reuse them. Over PCIe (Answer.AI's 3090s have no NVLink) a 250 MiB
// broadcast takes tens of milliseconds, the Python between it and the cat
// far less.
func (d *distState) fsdp1Broadcast(r *Replay, un *gatherUnit, states []wrapState) {
	var inFlight []int32
	for _, bk := range broadcastBuckets(states) {
		if len(inFlight) == 2 { // the oldest finishes first
			if inFlight[0] != none {
				r.release(inFlight[0])
			}
			inFlight = inFlight[1:]
		}
		var id int32 = none // a single tensor is broadcast as a view
		if len(bk) > 1 {
			var b int64
			for _, i := range bk {
				b += states[i].bytes
			}
			dt := states[bk[0]].dt
			id = d.alloc(r, un.name+" broadcast bucket (wrap)", []int64{b / dt.Bytes(1)}, dt, b, core.CatComm,
				"sync_module_states: a bucket of "+un.name+"'s states flattened for the broadcast from rank 0 (broadcast_coalesced)")
		}
		if rec := id; r.recordsNCCL() {
			if rec == none {
				rec = states[bk[0]].id
			}
			r.recordStream(rec, StreamNCCL)
		}
		inFlight = append(inFlight, id)
	}
	for _, id := range inFlight {
		if id != none {
			r.release(id)
		}
	}
}

// broadcastBuckets groups states as broadcast_coalesced's
// compute_bucket_assignment_by_size does (torch/csrc/distributed/c10d/
// reducer.cpp, a single size limit): one bucket open per dtype, closed
// once it holds fsdp1BroadcastBucket bytes, the open ones closed at the
// end, the buckets taken in the order of their first tensor. It returns
// indices into states.
func broadcastBuckets(states []wrapState) [][]int {
	type open struct {
		dt    units.DType
		idx   []int
		bytes int64
	}
	var out [][]int
	var opens []open
	for i, st := range states {
		j := slices.IndexFunc(opens, func(o open) bool { return o.dt == st.dt })
		if j < 0 {
			opens = append(opens, open{dt: st.dt})
			j = len(opens) - 1
		}
		opens[j].idx = append(opens[j].idx, i)
		opens[j].bytes += st.bytes
		if opens[j].bytes >= fsdp1BroadcastBucket {
			out = append(out, opens[j].idx)
			opens[j] = open{dt: st.dt}
		}
	}
	for _, o := range opens {
		if len(o.idx) > 0 {
			out = append(out, o.idx)
		}
	}
	slices.SortStableFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}

// wrapHostWaited says rank 0's host has waited for the device: the
// blocks the wrap's broadcasts held on the NCCL stream are free again.
func (d *distState) wrapHostWaited(r *Replay) {
	if r.recordsNCCL() {
		r.alloc.Synchronize(StreamNCCL, r.alloc.Mark())
	}
}

// fsdp1Buffers assigns each module buffer to the unit whose module moves
// it: the innermost unit around it (_move_module_to_device walks the
// unit's modules, stopping at nested FSDP instances), else the root. It
// returns the buffers of each unit and those of no unit (a layout with
// no root unit), which move before the wrap.
func (d *distState) fsdp1Buffers() (byUnit [][]int, loose []int) {
	pos := make(map[string]int, len(d.units))
	root := int32(none)
	for u := range d.units {
		if d.units[u].root {
			root = int32(u)
			continue
		}
		pos[d.units[u].name] = u
	}
	byUnit = make([][]int, len(d.units))
	for bi := range d.p.Buffers {
		name, isRoot := fsdpUnit(d.p.Buffers[bi].Name, pos)
		switch {
		case !isRoot:
			u := pos[name]
			byUnit[u] = append(byUnit[u], bi)
		case root != none:
			byUnit[root] = append(byUnit[root], bi)
		default:
			loose = append(loose, bi)
		}
	}
	return byUnit, loose
}

// fsdp1WrapDone starts the peak of allocated memory again from what the
// wrap kept: its transient tensors are construction's, not the step's
// (train.py calls reset_peak_memory_stats before its loop). The reserve
// it grew stays, as the caching allocator keeps it.
func (d *distState) fsdp1WrapDone(r *Replay) {
	d.wrapHostWaited(r) // before the step (train.py's dist.barrier(), the batch's copy to the GPU)
	r.allocatedPeak(r.alloc.Allocated)
}

// quantMoved reports whether Params4bit.to moves the quant_state tensor
// named name (bitsandbytes 0.43.0's QuantState.to, functional.py ll.
// 701-707: absmax, and under double quantization the offset and the
// nested absmax; the code table stays where it was made).
func quantMoved(name string) bool { return name != "nf4 code table" }

// quantRoundTrip reports whether quantized parameter pi's quant_state
// leaves the GPU after the loading and comes back with the wrap: on a
// rank that holds the model on the host (sync_module_states: rank 0 of
// Answer.AI's --low_memory), peft's LoraLayer.update_layer moves each
// adapted layer, its base layer included, to the base weight's device
// (self.to(weight.device, dtype=weight.dtype), tuners/lora/layer.py ll.
// 114-123 in peft 0.10.0, the same in 0.9.0 and 0.11.0), so
// Params4bit.to sends the quant_state to the host (modules.py ll.
// 314-316 in bitsandbytes 0.43.0); FSDP's _move_module_to_device then
// calls Params4bit.to(device), which moves it back just before the codes.
// The loading's segments it sat in stay cached (nothing empties the cache
// after the loading's empty_cache). A layer without an adapter (o_proj
// under Answer.AI's targets) keeps its quant_state on the GPU.
func (d *distState) quantRoundTrip(r *Replay, pi int32) bool {
	p := &d.p.Params[pi]
	return p.Quant != "" && r.Plan.LoRA != nil && r.Plan.Parallel.SyncStates && r.Plan.LoRA.Adapts(p.Role, strings.TrimSuffix(p.Name, ".weight"))
}
