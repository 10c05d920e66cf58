package replay

import "github.com/memsh/memsh/sim/core"

// ZeRO-3's gradient reduction in the backward, read from DeepSpeed 0.19.8's
// deepspeed/runtime/zero/stage3.py and runtime/comm/coalesced_collectives.py
// (the same code from v0.16.0 to v0.19.8), with its defaults
// (contiguous_gradients, reduce_scatter: __reduce_and_partition_ipg_grads
// takes __avg_scatter_grads, l.1673-1678) and measured on the CPU by
// tools/oracle/zero_reduce.py (sim/zero_reduce_test.go):
//
//   - each gradient's hook copies it into the reduce bucket allocated at
//     init (setupZeRO3) and frees autograd's tensor, unless it does not fit
//     in the bucket at all (__add_grad_to_ipg_bucket, l.1621-1645: more
//     than reduce_bucket_size elements), when param.grad stays autograd's
//     until the reduction's partition_grads sets it to None (l.2006-2060);
//     a gradient that would pass reduce_bucket_size, or whose partition
//     group differs from the bucket's (dense and expert parameters), first
//     reduces the bucket (reduce_independent_p_g_buckets_and_remove_grads,
//     l.1569-1600), and the backward's epilogue reduces the last one
//     (independent_gradient_partition_epilogue, l.1407-1410);
//   - a reduction hands the bucket's gradients to reduce_scatter_coalesced
//     (__avg_scatter_grads, l.1912-1948), which splits each of n elements
//     into the ranks' chunks of ceil(n/W), pads each short chunk with a
//     torch.empty of its own, and torch.cat's them interleaved, rank by
//     rank, into one flat buffer of sum ceil(n/W) x W elements in the
//     gradients' dtype (coalesced_collectives.py l.100-122), the
//     reduce-scatter's input and output; a lone gradient whose elements
//     W divides is reduced in place, nothing allocated (l.102-105). The
//     padding lives until reduce_scatter_coalesced returns; the flat
//     buffer as long as the rank's reduced partitions, views of it: until
//     __reduce_and_partition_ipg_grads returns, or, where
//     grad_accum_dtype differs (zero_accum.go), until their casts are made.
//
// Each rank's flat buffer is the same size: the replay's rank's is every
// rank's.

// zero3Bucket is ZeRO-3's reduce bucket as its reduction sees it.
type zero3Bucket struct {
	elems   int64   // gradient elements in the bucket
	part    int64   // elements of their partitions on this rank
	padded  int64   // elements of reduce_scatter_coalesced's flat buffer: sum of ceil(n/W) x W
	tensors int     // gradients in the bucket
	even    bool    // the first gradient's elements are a multiple of W
	expert  bool    // the bucket's partition group is the expert data-parallel one
	pads    []int64 // elements of each padding chunk, in order
	kept    []int32 // gradients too large for the bucket, autograd's until the reduction
}

// zero3Hook is parameter pi's gradient hook under ZeRO-3; it reports
// whether its gradient stays autograd's until the bucket is reduced.
func (d *distState) zero3Hook(r *Replay, pi int32) (kept bool) {
	if d.Par.Zero != 3 {
		return false
	}
	n := d.p.Params[pi].Numel
	if n == 0 {
		return false
	}
	b := &d.z3
	expert := IsExpertRole(d.p.Params[pi].Role)
	if b.tensors > 0 && (b.expert != expert || b.elems+n > d.zs.ReduceBucket) {
		d.zero3Reduce(r)
	}
	w := d.Degree(pi)
	chunk := ceilDiv(n, w)
	if b.tensors == 0 {
		b.even, b.expert = n%w == 0, expert
	}
	b.tensors++
	b.elems += n
	b.part += chunk
	b.padded += chunk * w
	if short := n % chunk; short != 0 { // the rank holding the end of the gradient
		b.pads = append(b.pads, chunk-short)
	}
	for k := ceilDiv(n, chunk); k < w; k++ { // the ranks past it: a whole chunk of padding each
		b.pads = append(b.pads, chunk)
	}
	if b.elems > d.zs.ReduceBucket { // alone, and larger than the bucket
		b.kept = append(b.kept, r.paramGrad[pi])
		r.paramGrad[pi] = none
		return true
	}
	return false
}

// zero3Reduce is __reduce_and_partition_ipg_grads over the bucket: the
// reduce-scatter's padding and flat buffer, the partitions' casts under
// grad_accum_dtype (zero_accum.go), then the gradients too large for the
// bucket freed by partition_grads.
func (d *distState) zero3Reduce(r *Replay) {
	b := &d.z3
	if b.tensors == 0 {
		return
	}
	s := d.zeroStream()
	dt := r.Plan.Precision.Params // communication_data_type: the gradients' dtype unless set
	flat := int32(none)
	if b.tensors > 1 || !b.even {
		pads := make([]int32, 0, len(b.pads))
		for _, n := range b.pads {
			pads = append(pads, d.allocOn(r, s, "reduce-scatter padding", []int64{n}, dt, dt.Bytes(n), core.CatComm,
				"padding of a gradient's short chunk (DeepSpeed reduce_scatter_coalesced: torch.empty)"))
		}
		flat = d.allocOn(r, s, "reduce-scatter flat buffer", []int64{b.padded}, dt, dt.Bytes(b.padded), core.CatComm,
			"the bucket's gradients interleaved by rank, padded to ceil(n/W) x W each (DeepSpeed reduce_scatter_coalesced: torch.cat)")
		for _, id := range pads {
			r.release(id)
		}
	}
	if r.Plan.Precision.ZeroGradAccum() && b.part > 0 {
		gt := r.Plan.Precision.Grads
		cast := d.allocOn(r, s, "reduced partitions in "+gt.String(), []int64{b.part}, gt, gt.Bytes(b.part), core.CatComm,
			"this rank's reduced partitions of the bucket's gradients cast to grad_accum_dtype (stage3.py __avg_scatter_grads)")
		if flat != none {
			r.release(flat)
		}
		flat = cast
	}
	if flat != none {
		r.release(flat)
	}
	for _, id := range b.kept {
		if id != none {
			r.release(id)
		}
	}
	*b = zero3Bucket{pads: b.pads[:0], kept: b.kept[:0]}
}
