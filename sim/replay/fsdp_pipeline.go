package replay

import "github.com/memsh/memsh/sim/core"

// FSDP2 on a pipeline stage, as torch.distributed.pipelining drives it
// (torchtitan's FSDP + PP): the stage's backward of every micro-batch but
// the last runs with set_requires_gradient_sync(False) and
// set_reshard_after_backward(False) (stage.py backward_maybe_with_nosync),
// and torchtitan wraps the blocks with reshard_after_forward=False under
// pipeline parallelism (parallelize_llama.py apply_fsdp). So from the
// first micro-batch's all-gather to the last micro-batch's backward every
// unit of the stage is unsharded, in param_dtype, and its gradients are
// unsharded too, accumulated in reduce_dtype (FSDPParam
// to_accumulated_grad_if_needed upcasts them when reduce_dtype differs
// from param_dtype). The parameters are all-gathered and the gradients
// reduce-scattered once per step.
//
// Each model chunk is a module of its own (torchtitan builds one
// PipelineStage and one fully_shard root per chunk: pipeline_llama.py,
// parallelize_llama.py at 9dec370), and the schedule counts each chunk's
// backwards: Schedule1F1B passes last_backward on the chunk's m-th
// micro-batch, PipelineScheduleMulti (interleaved) on the m-th backward of
// that chunk (backward_counter[stage_index] == n_microbatches; PyTorch
// 2.5/2.6 schedules.py). On that backward backward_maybe_with_nosync runs
// FSDP's post_backward for every unit of the chunk with
// reshard_after_backward and gradient sync back on: the unit is resharded,
// its unsharded accumulated gradients are copied into the reduce-scatter
// input and dropped (FSDPParamGroup.post_backward sets
// unsharded_accumulated_grad = None; foreach_reduce), and the sharded
// gradient is written. The accumulators exist only from the chunk's first
// backward (autograd makes the first gradient, to_accumulated_grad_if_needed
// keeps it) to its last: a chunk whose backward has not started when
// another chunk of the stage finishes (interleaved: chunk c + pp runs all
// its backwards before chunk c's first) never holds its gradients at the
// same time as that one.

// pipeChunks maps the stage's chunks onto the gather units.
func (d *distState) pipeChunks() {
	st := d.p.Stage
	d.chunkEnd = map[int32][]int{}
	d.chunkUnits = make([][]int32, len(st.Chunks))
	d.unitChunksTo = make([]int, len(d.units))
	for ci, c := range st.Chunks {
		d.chunkEnd[c.FirstOp] = append(d.chunkEnd[c.FirstOp], ci)
		for pi := c.Params[0]; pi < c.Params[1]; pi++ {
			u := d.unitOf[d.root(int32(pi))]
			if u == none || containsUnit(d.chunkUnits[ci], u) {
				continue
			}
			d.chunkUnits[ci] = append(d.chunkUnits[ci], u)
			d.unitChunksTo[u]++
		}
	}
}

// holdStage gathers every unit of the stage and allocates the accumulated
// unsharded gradients of the chunks whose backward ran before the
// replayed moment (and, with keep_grads, the sharded ones of the last
// step).
func (d *distState) holdStage(r *Replay) {
	r.op = "model"
	for u := range d.units {
		d.gather(r, int32(u))
	}
	r.op = "accumulated gradients"
	if r.Plan.KeepGrads { // zero_grad(set_to_none=False): the sharded gradients stay from the last step
		for u := range d.units {
			d.shardGrad(r, u)
		}
	}
	for _, c := range d.p.Stage.Chunks {
		if c.Done == 0 {
			continue
		}
		for pi := c.Params[0]; pi < c.Params[1]; pi++ {
			r.paramGradient(int32(pi), false)
		}
	}
}

// chunkPostBackward runs FSDP's post_backward for the units of the chunks
// whose last backward ends at op i (a unit shared by chunks, a tied
// weight's, once all of them are done): reshard, then reduce-scatter.
func (d *distState) chunkPostBackward(r *Replay, i int32) {
	for _, ci := range d.chunkEnd[i] {
		for _, u := range d.chunkUnits[ci] {
			if d.unitChunksTo[u]--; d.unitChunksTo[u] > 0 {
				continue
			}
			d.reshard(r, u)
			d.reduceScatter(r, u, false) // freed at once: each chunk's root runs post_backward itself, not measured
		}
	}
}

// pipeGradient allocates parameter pi's unsharded gradient in the reduce
// dtype (the accumulator of the micro-batches).
func (d *distState) pipeGradient(r *Replay, pi int32) {
	p := &d.p.Params[pi]
	dt := d.reduceDT
	r.paramGrad[pi] = r.allocate(Alloc{Tensor: p.Name + ".grad", Shape: p.Shape, DType: dt, Bytes: dt.Bytes(p.Numel),
		Why: "unsharded gradient of " + p.Name + ", accumulated over the pipeline's micro-batches (FSDP without gradient sync until the chunk's last)", Cat: core.CatGrads})
	r.Rep.States.Grads += dt.Bytes(p.Numel)
}
