package replay

import "github.com/memsh/memsh/sim/core"

// FSDP1 with CPU offload: FullyShardedDataParallel(cpu_offload=
// CPUOffload(offload_params=True)), offload(params="cpu") with
// parallel(fsdp=True, fsdp_version=1); what HF accelerate's
// fsdp_offload_params, llama-recipes' --fsdp_cpu_offload and Answer.AI's
// fsdp_qlora --use_cpu_offload run. Read from pytorch/pytorch at
// fe03cf693c (torch/distributed/fsdp/_flat_param.py: FlatParamHandle's
// init_flat_param_attributes, pre_unshard, _use_low_precision_shard,
// post_unshard, prepare_gradient_for_optim) and _runtime_utils.py
// (_unshard, _reduce_grad, _accumulate_sharded_grad, _offload_grad); the
// same code from torch 2.1 through 2.5.
//
// What is the same as FSDP2's CPUOffloadPolicy (fsdp_offload.go), and
// shares its code: the optimizer state is made by torch.optim on the
// host shards and stepped there (optimizerShard, FsdpHostStepElements,
// timing/torch_cpu_optimizer.go); no GPU optimizer step (optimizerStep);
// every gather copies this rank's shard to the GPU, every reduce-scatter
// its gradient shard back.
//
// What differs, and why:
//
//   - the host tensors are one flat shard per unit, pinned with
//     Tensor.pin_memory() (_local_shard), and a pinned zeros_like of it,
//     _cpu_grad, for every FlatParameter whether or not it requires grad,
//     both in the parameters' dtype: pin_memory goes through
//     CachingHostAllocator, which rounds each to a power of two
//     (PinnedBlock);
//   - pre_unshard copies the shard to the GPU on the pre-unshard stream
//     (flat_param_to(device, non_blocking=True)); with parameter mixed
//     precision _use_low_precision_shard first allocates _mp_shard in
//     param_dtype (as it does without offload, fsdp1PreUnshard), then
//     casts into it through a full-precision GPU copy of the shard that
//     is freed at once; post_unshard frees _mp_shard after the
//     all-gather. These copies come from the pre-unshard
//     stream's pool (StreamPreUnshard), recorded on the unshard stream
//     that reads them: the blocks it caches add to reserved memory;
//   - after the reduce-scatter the gradient shard is cast to the
//     parameters' dtype (_cast_grad_to_param_dtype), copied to _cpu_grad
//     (non_blocking) and kept on the GPU as _saved_grad_shard until the
//     backward's final callback deletes it (prepare_gradient_for_optim):
//     unlike FSDP2, which frees it after the copy, FSDP1 holds every
//     unit's gradient shard on the GPU until the backward ends.

// syncGradsToHost counts, under no_sync (grad_accum > 1: the replayed
// micro-batch reduces nothing, fsdp1.go), the copies of the trainable
// units' gradient shards to the host that the step's synchronising
// micro-batch makes, once per step.
func (d *distState) syncGradsToHost(r *Replay) {
	if !d.noSync || !d.FsdpOffload(r) {
		return
	}
	for u := range d.units {
		if d.units[u].trainable {
			d.copyUp(r, r.Plan.Precision.Params.Bytes(d.gatheredSize(int32(u))/d.dp))
		}
	}
}

// hostFlatShard puts a unit's flat shard of b bytes on the host: the
// pinned _local_shard and its pinned _cpu_grad, both rounded up by the
// CachingHostAllocator. The lazy init makes _cpu_grad in evaluation too
// (host memory); in training the gradient is counted with the model
// states as FSDP2's host gradient shards are.
func (d *distState) hostFlatShard(r *Replay, b int64) {
	fo := r.fo()
	fo.hostParams += PinnedBlock(b)
	fo.addHostGrads(r.Plan.Precision.Params, PinnedBlock(b))
	fo.hostGradsPinned = true
	if r.Plan.Phase != core.Eval {
		r.Rep.States.Grads += b
	}
}

// fsdp1PreUnshard is pre_unshard for unit u, run on the pre-unshard
// stream before the all-gather, and returns the tensor the all-gather
// reads there, none when it reads the flat shard itself:
//
//   - with parameter mixed precision, _use_low_precision_shard allocates
//     _mp_shard in param_dtype and casts the shard into it, through a
//     full-precision GPU copy of it, freed at once, when the shard is on
//     the host;
//   - otherwise, under CPU offload, flat_param_to(device) copies the
//     shard to the GPU;
//   - otherwise nothing (the GPU shard is all-gathered as it is).
//
// The caller frees it once the unsharded flat parameter is allocated:
// it is recorded on the unshard stream that reads it (the all-gather's
// _no_dispatch_record_stream, post_unshard's for _mp_shard).
func (d *distState) fsdp1PreUnshard(r *Replay, u int32) int32 {
	offload := d.FsdpOffload(r)
	full := r.Plan.Precision.Params
	if !offload && d.gatherDT == full {
		return none
	}
	un := &d.units[u]
	n := d.gatheredSize(u) / d.dp
	if offload {
		d.copyDown(r, full.Bytes(n)*d.offloadRepeats())
	}
	var id int32
	switch {
	case d.gatherDT == full:
		id = d.allocUnit(r, StreamPreUnshard, un, n, Alloc{Tensor: " flat shard from host", DType: full, Bytes: full.Bytes(n), Why: un.name},
			"GPU copy of this rank's pinned flat shard of ", ", read by the all-gather (FSDP1 CPUOffload: pre_unshard)")
	default:
		id = d.allocUnit(r, StreamPreUnshard, un, n, Alloc{Tensor: " _mp_shard", DType: d.gatherDT, Bytes: d.gatherDT.Bytes(n), Why: un.name},
			"low-precision flat shard of ", ", the all-gather's input (FSDP1 mixed precision; freed by post_unshard)")
		if offload {
			r.release(d.allocUnit(r, StreamPreUnshard, un, n, Alloc{Tensor: " flat shard from host", DType: full, Bytes: full.Bytes(n), Why: un.name},
				"full-precision GPU copy of this rank's pinned flat shard of ", ", cast into _mp_shard and freed (FSDP1 CPUOffload: _use_low_precision_shard)"))
		}
	}
	r.recordStream(id, StreamAllGather)
	return id
}

// fsdp1GradToHost is the sharded gradient of unit u after its
// reduce-scatter, cast to the parameters' dtype (out,
// castGradToParamDType), under CPU offload: copied to the pinned
// _cpu_grad and kept as _saved_grad_shard until the backward ends
// (releaseSavedGradShards).
func (d *distState) fsdp1GradToHost(r *Replay, u int32, out int32) {
	un := &d.units[u]
	s := d.gatheredSize(u) / d.dp
	d.copyUp(r, r.Plan.Precision.Params.Bytes(s))
	if un.grad == none {
		un.grad = out
	} else {
		r.release(out) // _saved_grad_shard += sharded_grad
	}
}

// releaseSavedGradShards frees the units' GPU gradient shards in the
// backward's final callback (prepare_gradient_for_optim deletes
// _saved_grad_shard; the optimizer reads _cpu_grad).
func (d *distState) releaseSavedGradShards(r *Replay) {
	for u := range d.units {
		if un := &d.units[u]; un.grad != none {
			r.release(un.grad)
			un.grad = none
		}
	}
}
