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
// returns. The bucket is reduced when the next gradient would pass
// reduce_bucket_size (l.1528-1533) and at the backward's end. ZeRO-1/2's
// are zero_grads.go's.
//
// The reduce-scatter's own input, the interleaved torch.cat of the
// bucket's gradients in reduce_scatter_coalesced
// (runtime/comm/coalesced_collectives.py), is not replayed in either
// dtype.

// zero3Accum is ZeRO-3's reduce bucket as the accumulation cast sees it.
type zero3Accum struct {
	bucket int64 // gradient elements in the bucket
	part   int64 // elements of their partitions on this rank
}

// zero3AccumHook is parameter pi's gradient entering ZeRO-3's bucket
// under a grad_accum_dtype other than the model's: a gradient that would
// pass the bucket's size reduces the bucket first.
func (d *distState) zero3AccumHook(r *Replay, pi int32) {
	if d.Par.Zero != 3 || !r.Plan.Precision.ZeroGradAccum() {
		return
	}
	n := d.p.Params[pi].Numel
	if n == 0 {
		return
	}
	if d.z3.bucket > 0 && d.z3.bucket+n > d.zs.ReduceBucket {
		d.zero3AccumReduce(r)
	}
	d.z3.bucket += n
	d.z3.part += ceilDiv(n, d.Degree(pi))
}

// zero3AccumReduce is a bucket's reduction: the reduced partitions cast
// to the accumulation dtype while they are copied into
// grad_partitions_flat_buffer.
func (d *distState) zero3AccumReduce(r *Replay) {
	if d.z3.part > 0 {
		dt, n := r.Plan.Precision.Grads, d.z3.part
		r.release(d.allocOn(r, d.zeroStream(), "reduced partitions in "+dt.String(), []int64{n}, dt, dt.Bytes(n), core.CatComm,
			"this rank's reduced partitions of the bucket's gradients cast to grad_accum_dtype (stage3.py __avg_scatter_grads)"))
	}
	d.z3 = zero3Accum{}
}
