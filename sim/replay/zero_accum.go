package replay

import "github.com/memsh/memsh/sim/core"

// DeepSpeed's gradient accumulation in another dtype than the model's
// (data_types.grad_accum_dtype, core.Precision.ZeroGradAccum), read from
// deepspeed/runtime/zero/stage3.py at edaa722. Autograd makes each
// gradient in the parameter's dtype (Replay.gradDType); ZeRO-3's
// grad_partitions_flat_buffer is in the accumulation dtype (setupZeRO3),
// and each reduction casts what it hands it: the reduce-scatter runs in
// communication_data_type (the model's dtype unless set: engine.py
// l.1405-1416) over the bucket's gradients, then __avg_scatter_grads
// casts each parameter's reduced partition,
// [g.to(self.gradient_accumulation_dtype) for g in grad_partitions_for_rank]
// (l.1825-1826), a list partition_grads copies into the buffer
// (l.1886-1925) and that is dropped when __reduce_and_partition_ipg_grads
// returns. ZeRO-1/2's are zero_grads.go's.
//
// The reduce-scatter's own input and the bucket's reduction are
// zero3_reduce.go's.

// DeepSpeed runs ZeRO-1 with a bf16 model accumulating in fp32, the
// optimizer on the GPU, as its BF16_Optimizer (engine.py
// _do_optimizer_sanity_check l.1994-1997; core.Plan.ZeroBF16Optimizer),
// read from deepspeed/runtime/bf16_optimizer.py at edaa722 with its
// defaults (immediate_grad_update false: precision_config.py l.51):
//
//   - at init (_setup_for_real_optimizer, l.160-230) each group's bf16
//     parameters are flattened, aligned to 2 x dp (bf16_groups_flat: the
//     ZeRO-1 flat groups setupZeRO12 allocates), its rank's partition
//     cloned to fp32 (the master partition the optimizer steps, its
//     moments beside it), and fp32_groups_gradients_flat made:
//     zeros_like(bf16_groups_flat, dtype=grad_acc_dtype), the whole
//     group in fp32, kept;
//   - autograd's gradients stay in param.grad, bf16, whole: no hook takes
//     them; each backward's prologue zeroes them in place
//     (clear_lp_grads(set_to_none=False)), and the step's zero_grad()
//     frees them after the update (engine.py _take_model_step);
//   - the backward's epilogue (update_hp_grads, l.355-399) adds each
//     gradient into its slice of the fp32 buffer, through a copy,
//     hp_grad.add_(lp.grad.to(fp32)), one parameter at a time; at the
//     accumulation boundary the engine all-reduces each fp32 group
//     (buffered_allreduce_fallback with get_grads_for_reduction,
//     l.3784-3798): allreduce_bucket (l.3658-3684) casts it to
//     communication_data_type, a bf16 copy of the whole group while it is
//     reduced, and copies the result back;
//   - step() (l.307-348) hands the optimizer its partition of the fp32
//     buffer, a view, steps in place, copies the master partition into the
//     bf16 one and all-gathers the groups in place (all_gather_into_tensor).
//
// The replay follows it: no reduce bucket, no gradient partition
// (zero_grads.go), the fp32 groups from setup, the casts at the
// backward's end, the lp gradients held through the step.

// bf16FlatNumel is BF16_Optimizer's flat group g, elements: aligned to
// 2 x its ranks (_flatten_dense_tensors_aligned).
func bf16FlatNumel(g paramGroup) int64 {
	return ZeroPartition(g.numel, g.n) * g.n
}

// setupBF16Optimizer allocates fp32_groups_gradients_flat and reports
// its bytes.
func (d *distState) setupBF16Optimizer(r *Replay) int64 {
	dt := r.Plan.Precision.Grads
	var b int64
	for _, g := range d.groups(true) {
		n := bf16FlatNumel(g)
		d.alloc(r, g.name+" fp32_groups_gradients_flat", []int64{n}, dt, dt.Bytes(n), core.CatGrads,
			"BF16_Optimizer's gradient accumulation buffer: the whole flat group in grad_accum_dtype (bf16_optimizer.py)")
		b += dt.Bytes(n)
	}
	return b
}

// bf16Epilogue is BF16_Optimizer's backward epilogue and the boundary's
// all-reduce: each gradient cast to fp32 and added into the buffer, then
// each group's bf16 copy while it is reduced.
func (d *distState) bf16Epilogue(r *Replay) {
	prec := r.Plan.Precision
	for _, g := range d.groups(true) {
		for _, pi := range g.params {
			if r.paramGrad[pi] == none {
				continue
			}
			n := d.p.Params[pi].Numel
			r.release(d.alloc(r, "gradient in "+prec.Grads.String(), []int64{n}, prec.Grads, prec.Grads.Bytes(n), core.CatTemporaries,
				"lp.grad.to(grad_acc_dtype), added into the fp32 buffer (BF16_Optimizer update_hp_grads)"))
		}
	}
	for _, g := range d.groups(true) {
		if g.n <= 1 {
			continue
		}
		n := bf16FlatNumel(g)
		r.release(d.alloc(r, g.name+" all-reduce copy", []int64{n}, prec.Params, prec.Params.Bytes(n), core.CatComm,
			"the fp32 gradient group cast to communication_data_type while it is all-reduced (engine.py allreduce_bucket)"))
	}
}
