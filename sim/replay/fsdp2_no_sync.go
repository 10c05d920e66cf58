package replay

import "github.com/memsh/memsh/sim/core"

// FSDP2 accumulating without gradient sync: parallel(fsdp_no_sync=True),
// fully_shard's set_requires_gradient_sync(False) on the micro-batches
// that do not step, as Hugging Face accelerate 1.11.0 and later run
// accumulate() (accelerator.py no_sync at v1.14.0 beb0672aa8, since
// ec92b1af7a). FSDPParamGroup.post_backward then reduces nothing: each
// parameter's unsharded gradient stays, upcast to reduce_dtype when that
// differs from param_dtype (FSDPParam.to_accumulated_grad_if_needed, the
// later micro-batches' gradients added into it by
// accumulate_unsharded_grad_if_needed), and the micro-batch that steps
// reduce-scatters it once. torchtitan's trainer never turns the sync off
// (torchtitan/trainer.py at b5bcd76c66): memsh's FSDP2 default. The
// replayed micro-batch is one that does not step: the accumulators exist
// from its start, its own gradients (param_dtype) live until their unit's
// post-backward adds them in (in place when the dtypes agree: the .grad is
// the accumulator). A pipeline stage's FSDP2 holds its gradients so by
// itself (fsdp_pipeline.go).

// FSDPNoSync reports whether plan's replayed micro-batch reduces no
// gradient: FSDP1 under no_sync() (FSDP1NoSync) or FSDP2 with
// fsdp_no_sync, with gradient accumulation.
func FSDPNoSync(plan *core.Plan) bool {
	par := plan.Parallel.Norm()
	return FSDP1NoSync(plan) || (par.FSDP && par.FSDPVersion != 1 && par.FSDPNoSync && plan.GradAccum > 1)
}

// accumulators allocates the unsharded gradients the micro-batches before
// the replayed one accumulated, in reduce_dtype.
func (d *distState) accumulators(r *Replay) {
	r.op = "accumulated gradients"
	dt := d.reduceDT
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.TiedTo >= 0 || !p.Trainable || d.unitOf[pi] == none {
			continue
		}
		acc := r.allocate(Alloc{Tensor: p.Name + " unsharded_accumulated_grad", Shape: p.Shape, DType: dt, Bytes: dt.Bytes(p.Numel),
			Why: "unsharded gradient of " + p.Name + ", accumulated without gradient sync since the last step (FSDP2 set_requires_gradient_sync(False))", Cat: core.CatGrads})
		r.Rep.States.Grads += dt.Bytes(p.Numel)
		if dt == d.gatherDT {
			r.paramGrad[pi] = acc // the .grad itself accumulates
		} // else held to the end of the replay, as the step's states are
	}
}

// postBackwardNoSync is FSDP2's post-backward without gradient sync: the
// unit's own gradients, in param_dtype, are added into the accumulators
// and freed (kept when they are the accumulators).
func (d *distState) postBackwardNoSync(r *Replay, u int32) {
	if d.reduceDT == d.gatherDT {
		return
	}
	for _, pi := range d.units[u].params {
		if r.paramGrad[pi] != none {
			r.release(r.paramGrad[pi])
			r.paramGrad[pi] = none
		}
	}
}
