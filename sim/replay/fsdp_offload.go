package replay

// FSDP2 with CPU offload (fully_shard(offload_policy=CPUOffloadPolicy()),
// offload(params="cpu") with parallel(fsdp=True)). Read from
// torch/distributed/fsdp/_fully_shard (_fsdp_api.py CPUOffloadPolicy,
// _fsdp_param.py, _fsdp_collectives.py; pytorch/pytorch 17a7e1e09b):
//
//   - the sharded parameters live in pinned host memory in their own dtype
//     (FSDPParam._init_sharded_param moves each parameter's padded shard
//     to the CPU and, with CPUOffloadPolicy's default pin_memory=True,
//     pins it: a CachingHostAllocator block each, rounded up to a power of
//     two, PinnedBlock), so the optimizer creates its state there and
//     steps on the CPU, and the sharded gradients are host tensors too:
//     foreach_reduce copies each parameter's gradient shard with
//     .to("cpu", non_blocking=True), which allocates its destination
//     pinned (aten's _to_copy: pin_out for a non-blocking copy from the
//     GPU), a block each (a later micro-batch's copy, blocking, is added
//     into it);
//   - before a unit's all-gather each shard is copied to the GPU
//     (all_gather_inputs: _sharded_param_data.to(device)) and cast to
//     param_dtype under a MixedPrecisionPolicy: both copies are GPU
//     temporaries next to the all-gather output;
//   - after the reduce-scatter the gradient shard is copied to the host
//     (foreach_reduce: reduce_output.to("cpu")) and freed on the GPU; with
//     accumulation the add happens on the host.
//
// PCIe per step: every gather copies the unit's shards down, every
// reduce-scatter its gradient shard up. The optimizer (torch.optim's own)
// steps the shards on the host: timing/torch_cpu_optimizer.go prices it
// from FsdpHostStepElements. FSDP1's CPUOffload(offload_params=True) keeps
// the same states on the host, through other tensors: fsdp1_offload.go.

// FsdpOffload reports whether FSDP (FSDP2's CPUOffloadPolicy or FSDP1's
// CPUOffload(offload_params=True)) keeps its shards, gradients and
// optimizer state on the host.
func (d *distState) FsdpOffload(r *Replay) bool {
	return d != nil && d.Mode == DistFSDP && r.Plan.Offload != nil && r.Plan.Offload.Params != ""
}

// FsdpHostStepElements is the number of elements torch's optimizer steps
// on the host under FSDP's CPU offload: this rank's shards of the
// trainable parameters, as setupFSDP (dim-0 shards, FSDP2) or setupFSDP1
// (1/dp of each parameter's elements in the flat shard) sizes their
// optimizer state; 0 without it.
func (d *distState) FsdpHostStepElements(r *Replay) int64 {
	if !d.FsdpOffload(r) {
		return 0
	}
	var n int64
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		switch {
		case p.TiedTo >= 0 || !p.Trainable:
		case d.fsdp1:
			n += ceilDiv(p.Numel, d.Degree(int32(pi)))
		default:
			n += fsdpShard(p.Shape, p.Numel, d.Degree(int32(pi)))
		}
	}
	return n
}

// hostGradShards counts FSDP2's gradient shards on the host, each
// trainable parameter's a pinned block (the model states count the
// gradient bytes).
func (d *distState) hostGradShards(r *Replay) {
	dt := r.Plan.Precision.Grads
	fo := r.fo()
	for u := range d.units {
		for _, pi := range d.units[u].params {
			p := &d.p.Params[pi]
			if !p.Trainable {
				continue
			}
			b := dt.Bytes(fsdpShard(p.Shape, p.Numel, d.Degree(pi)))
			fo.addHostGrads(dt, PinnedBlock(b))
			r.Rep.States.Grads += b
		}
	}
	fo.hostGradsPinned = true
}

// copyDown and copyUp count b bytes per step of FSDP's offload copies to
// the GPU (the shards before their gathers) and to the host (the gradient
// shards after their reduce-scatters).
func (d *distState) copyDown(r *Replay, b int64) {
	d.fsdpDown += b
	r.Rep.Traffic.PCIe += b
}

func (d *distState) copyUp(r *Replay, b int64) {
	d.fsdpUp += b
	r.Rep.Traffic.PCIe += b
}

// FsdpOffloadPCIe is the bytes per step FSDP's CPU offload copies to the
// GPU (down) and to the host (up), and ZeRO-3 offload_param's partitions
// to the GPU before their all-gathers (down), part of
// Report.Traffic.PCIe: the time model overlaps them with the compute as
// it does the collectives whose chain they sit in (timing/comm.go
// exposedComm). DeepSpeed copies each partition to the GPU inside the
// all-gather it issues on its all-gather stream (partition_parameters.py
// _all_gather_dtype, p.ds_tensor.to(device), 1331-1333 and 1368 at
// edaa722; partitioned_param_coordinator.py __all_gather_params_ under
// get_accelerator().stream(self.__allgather_stream), 606), and the
// coordinator prefetches the next modules' gathers
// (stage3_prefetch_bucket_size, 452-484) once the trace is complete.
// That .to() is blocking: it synchronises the all-gather stream, holding
// the CPU thread until the copy is done, which stalls the issue of
// further kernels; memsh does not model the CPU's lead here, as for FSDP.
func (d *distState) FsdpOffloadPCIe() (down, up int64) {
	if d == nil {
		return 0, 0
	}
	return d.fsdpDown, d.fsdpUp
}

// offloadRepeats is how many times per step the replayed micro-batch's
// copies to and from the host run: once per micro-batch (the replay
// replays one; every micro-batch gathers again, as stepComm counts the
// all-gathers), once for a pipeline stage that holds its units gathered
// through the step (fsdp_pipeline.go).
func (d *distState) offloadRepeats() int64 {
	if d.pipeHold {
		return 1
	}
	return max(d.plan.GradAccum, 1)
}

// unitShard is this rank's FSDP2 shard of unit u's parameters, elements
// (trainable only when trainable is set).
func (d *distState) unitShard(u int32, trainableOnly bool) int64 {
	var n int64
	for _, pi := range d.units[u].params {
		p := &d.p.Params[pi]
		if !trainableOnly || p.Trainable {
			n += fsdpShard(p.Shape, p.Numel, d.Degree(pi))
		}
	}
	return n
}

// fsdpShardsToGPU allocates the GPU copies of unit u's host shards that
// its all-gather reads (and their cast to the all-gather dtype); the
// caller frees them once the all-gather output exists.
func (d *distState) fsdpShardsToGPU(r *Replay, u int32) []int32 {
	un := &d.units[u]
	n := d.unitShard(u, false)
	dt := r.Plan.Precision.Params
	d.copyDown(r, dt.Bytes(n)*d.offloadRepeats())
	ids := make([]int32, 1, 2)
	ids[0] = d.allocUnit(r, StreamAllGather, un, n, Alloc{Tensor: " shards from host", DType: dt, Bytes: dt.Bytes(n), Why: un.name},
		"GPU copy of this rank's host shards of ", " (FSDP2 CPUOffloadPolicy: all_gather_inputs)")
	if d.gatherDT != dt {
		ids = append(ids, d.allocUnit(r, StreamAllGather, un, n, Alloc{Tensor: " shards cast", DType: d.gatherDT, Bytes: d.gatherDT.Bytes(n),
			Why: "the shards cast to param_dtype for the all-gather (MixedPrecisionPolicy)"}, "", ""))
	}
	return ids
}

// fsdpGradToHost is the reduce-scatter output of unit u, copied to the
// host and freed.
func (d *distState) fsdpGradToHost(r *Replay, u int32) {
	un := &d.units[u]
	s := d.unitGradShard(int(u))
	dt := r.Plan.Precision.Grads
	r.release(d.allocUnit(r, StreamReduceScatter, un, s, Alloc{Tensor: " reduce-scatter output", DType: dt, Bytes: dt.Bytes(s), Why: un.name},
		"FSDP reduce-scatter output of ", ", copied to the host gradient shard"))
	d.copyUp(r, dt.Bytes(s)*d.offloadRepeats()) // fully_shard reduces every micro-batch, as stepComm counts it
}
