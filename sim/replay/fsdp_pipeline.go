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
// from param_dtype). The steady state the stage replays holds both; the
// parameters are all-gathered and the gradients reduce-scattered once per
// step.

// holdStage gathers every unit of the stage and, in the steady state,
// allocates the accumulated unsharded gradients.
func (d *distState) holdStage(r *Replay) {
	r.op = "model"
	for u := range d.units {
		d.gather(r, int32(u))
	}
	if !r.Plan.GradsPersist() {
		return
	}
	r.op = "accumulated gradients"
	for pi := range d.p.Params {
		r.paramGradient(int32(pi), false)
	}
}

// pipeGradient allocates parameter pi's unsharded gradient in the reduce
// dtype (the accumulator of the micro-batches).
func (d *distState) pipeGradient(r *Replay, pi int32) {
	p := &d.p.Params[pi]
	dt := d.reduceDT
	r.paramGrad[pi] = r.allocate(Alloc{Tensor: p.Name + ".grad", Shape: p.Shape, DType: dt, Bytes: dt.Bytes(p.Numel),
		Why: "unsharded gradient of " + p.Name + ", accumulated over the pipeline's micro-batches (FSDP without gradient sync until the last)", Cat: core.CatGrads})
	r.Rep.States.Grads += dt.Bytes(p.Numel)
}
