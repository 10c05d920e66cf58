package replay

import (
	"github.com/memsh/memsh/sim/alloc"
	"github.com/memsh/memsh/sim/core"
)

// ZeRO-1 and ZeRO-2's gradients on the GPU, read from DeepSpeed's
// deepspeed/runtime/zero/stage_1_and_2.py at edaa722 with its defaults
// (contiguous_gradients, reduce_scatter, use_multi_rank_bucket_allreduce,
// no cpu_offload). Stage 2:
//
//   - each gradient hook copies the gradient into the reduce bucket
//     (the ipg buffer, allocated at the backward's first hook:
//     setup_buckets, l.2493-2516) and frees autograd's tensor; a gradient
//     that would pass reduce_bucket_size first reduces the bucket
//     (reduce_independent_p_g_buckets_and_remove_grads, l.1193-1253);
//   - the reduction cuts the bucket into slices, one for each rank's
//     partition each gradient overlaps, the slices of consecutive
//     gradients in one partition merged (average_tensor, 0.19.8
//     l.1590-1700: rank_and_offsets), and flattens them into a copy
//     (allreduce_bucket, l.2359-2400: self.flatten(bucket)) that lives
//     while it is reduced; a bucket of one slice (every gradient in it in
//     one rank's partition) is flattened as a view, nothing allocated
//     (torch's flatten_dense_tensors of one tensor; measured by
//     tools/oracle/zero_reduce.py, sim/zero_reduce_test.go). It then copies each
//     gradient of a parameter in this rank's partition into
//     grads_in_partition (reduce_ipg_grads, l.1691-1756), which the first
//     such copy of a backward allocates with the elements of every
//     parameter of params_in_partition, whole: the parameters whose flat
//     range overlaps the rank's (copy_grads_in_partition, l.1650-1689;
//     get_partition_info, l.1986-2015), reached or not;
//   - the backward's epilogue (independent_gradient_partition_epilogue,
//     l.919-969) reduces the last bucket and lists the partition's
//     gradients (get_all_grad_tensors, l.2106-2114), making
//     zeros_like(param) for each parameter of the partition whose grad is
//     None (one the step does not reach: an idle tower, an expert no token
//     chose), then _release_ipg_buffers (l.828-835) drops the buckets and
//     the grads_in_partition reference. At a step's first micro-batch the
//     list is kept (all_grad_tensors, averaged_gradients at the boundary),
//     holding that grads_in_partition and the zeros; at a later one it is
//     added into the kept list and dropped, with the micro-batch's own
//     grads_in_partition: so a later micro-batch holds two partitions
//     from its first reduction to its epilogue;
//   - step() (l.2279-2411) flattens the kept list (optimizerStep) and
//     frees it.
//
// Stage 1's hooks only set the bucket up: autograd keeps every gradient in
// param.grad until the accumulation boundary, where the engine's
// reduce_gradients (deepspeed/runtime/engine.py allreduce_gradients;
// stage_1_and_2.py l.861-884) passes each one, in the flat groups' order,
// through the same bucket, reductions and copies (reduce_ipg_grads'
// stage-1 branch copies the partition's gradients into
// grads_in_partition), then runs the same epilogue (zero1Reduce). With
// overlap_comm the hooks of the boundary's backward reduce as stage 2's do
// (process_gradients, reduce_ready_partitions_and_remove_grads,
// l.1758-1769).
//
// The replay follows the rank whose partition holds the most gradient
// elements with its zeros (zeroRank), its parameters flattened in the
// program's order, the order the step first reads them; DeepSpeed
// flattens them in the modules' registration order, which can differ (a
// vision-language model's embedding comes before its tower here, after
// it in transformers). With overlap_comm the reduction and the copies run
// on the reduction stream, which allocates them.

// zeroGrads is ZeRO-1/2's gradient state of a replay.
type zeroGrads struct {
	inPart  []bool // by parameter: in the followed rank's partition
	numel   int64  // elements of grads_in_partition (0: the step reaches none of them)
	zeros   int64  // elements of the zero gradients of the partition's parameters the step does not reach
	bucket  int64  // gradient elements in the reduce bucket
	hasPart bool   // the bucket holds a gradient of the partition
	cur     int32  // this micro-batch's grads_in_partition, none until its first copy
	held    int32  // the step's kept grads_in_partition, none
	heldZ   int32  // the step's kept zero gradients, none
	// lo and hi, by parameter: the first and last partition its elements
	// fall in, in its flat group grp (-1 outside the flat groups).
	lo, hi []int32
	grp    []int8
	// maxSlice is the largest part of one parameter in the partition,
	// elements: the step's largest fp64 copy for the norm (zero_step.go).
	maxSlice int64
	// slices is the bucket's slices so far (average_tensor), last the
	// partition and group of the last one.
	slices   int
	lastPart int32
	lastGrp  int8
	// wide, by flat group: the followed rank's gradient list holds a
	// tensor in the accumulation dtype (a zero gradient, or the last
	// rank's padding: get_flat_partition), so the step's torch.cat of it
	// is in that dtype.
	wide []bool
}

// zeroRank picks the rank whose partition holds the most gradient
// elements, grads_in_partition and zeros together, group by group (dense
// and expert parameters have partitions of their own), and marks its
// parameters. A group is flattened in parameter order and padded at its
// end (ZeroPartition); rank k's partition is [k*size, (k+1)*size).
func (d *distState) zeroRank(r *Replay) *zeroGrads {
	np := len(d.p.Params)
	z := &zeroGrads{inPart: make([]bool, np), lo: make([]int32, np), hi: make([]int32, np), grp: make([]int8, np), cur: none, held: none, heldZ: none}
	for i := range z.grp {
		z.grp[i] = -1
	}
	for gi, g := range d.groups(true) {
		size := ZeroPartition(g.numel, g.n)
		k := d.zeroWorst(r, g, size)
		wide := k == g.n-1 && size*g.n > g.numel // padded
		var off int64
		for _, pi := range g.params {
			n := d.p.Params[pi].Numel
			if n > 0 {
				z.lo[pi], z.hi[pi], z.grp[pi] = int32(off/size), int32((off+n-1)/size), int8(gi)
			}
			if n > 0 && off < (k+1)*size && off+n > k*size {
				z.maxSlice = max(z.maxSlice, min(off+n, (k+1)*size)-max(off, k*size))
				z.inPart[pi] = true
				z.numel += n
				if r.gradless[pi] {
					z.zeros += n
					wide = true
				}
			}
			off += n
		}
		z.wide = append(z.wide, wide)
	}
	if !d.zeroReached(r, z) {
		z.numel = 0 // no copy ever allocates it
	}
	return z
}

// zeroWorst is the rank of group g (partitions of size elements) whose
// parameters, each counted whole in every partition it overlaps, and zero
// gradients add up to the most. Of several, the one whose gradients are
// reduced first, so that it holds grads_in_partition longest: stage 2's
// backward reduces the flat buffer from its end (it follows the forward),
// the highest rank's first; stage 1's reduce_gradients from its start.
func (d *distState) zeroWorst(r *Replay, g paramGroup, size int64) int64 {
	var best, bestN, cur, curN int64
	var off int64
	last := d.Par.Zero == 2
	add := func(k, n int64) {
		if k != cur {
			cur, curN = k, 0
		}
		curN += n
		if curN > bestN || curN == bestN && last {
			best, bestN = cur, curN
		}
	}
	for _, pi := range g.params {
		n := d.p.Params[pi].Numel
		if n == 0 {
			continue
		}
		w := n
		if r.gradless[pi] {
			w = 2 * n // its slot in grads_in_partition and its zeros
		}
		for k := off / size; k <= (off+n-1)/size && k < g.n; k++ {
			add(k, w)
		}
		off += n
	}
	return best
}

// zeroReached reports whether the step gives a gradient to a parameter
// of the partition (the first copy allocates grads_in_partition).
func (d *distState) zeroReached(r *Replay, z *zeroGrads) bool {
	for pi, in := range z.inPart {
		if in && !r.gradless[pi] {
			return true
		}
	}
	return false
}

// zeroStream is the stream the reductions allocate on.
func (d *distState) zeroStream() alloc.Stream {
	if d.Par.OverlapComm {
		return StreamReduceScatter
	}
	return StreamCompute
}

// zeroHook is parameter pi's gradient hook, before its gradient is copied
// into the bucket: a gradient that would pass the bucket's size reduces
// the bucket first.
func (d *distState) zeroHook(r *Replay, pi int32) {
	z := d.zg
	n := d.p.Params[pi].Numel
	if n == 0 {
		return
	}
	if z.bucket > 0 && z.bucket+n > d.zs.ReduceBucket {
		d.zeroReduce(r)
	}
	z.bucket += n
	z.hasPart = z.hasPart || z.inPart[pi]
	if z.slices == 0 || z.lo[pi] != z.lastPart || z.grp[pi] != z.lastGrp || z.grp[pi] < 0 {
		z.slices++ // else its first slice is merged into the bucket's last
	}
	z.slices += int(z.hi[pi] - z.lo[pi])
	z.lastPart, z.lastGrp = z.hi[pi], z.grp[pi]
}

// zeroReduce is reduce_ipg_grads: the bucket's flattened copy while it is
// reduced (of more than one slice), then the partition's gradients copied
// out, into this micro-batch's grads_in_partition.
func (d *distState) zeroReduce(r *Replay) {
	z := d.zg
	if z.bucket == 0 {
		return
	}
	s := d.zeroStream()
	dt := r.Plan.Precision.Params
	if z.slices > 1 {
		r.release(d.allocOn(r, s, "reduced bucket", []int64{z.bucket}, dt, dt.Bytes(z.bucket), core.CatComm,
			"flattened copy of the reduce bucket's slices while they are reduced (DeepSpeed allreduce_bucket)"))
	}
	if z.hasPart && z.cur == none && z.numel > 0 {
		gt := r.Plan.Precision.Params // self.dtype, whatever grad_accum_dtype (l.1678-1680)
		z.cur = d.allocOn(r, s, "grads_in_partition", []int64{z.numel}, gt, gt.Bytes(z.numel), core.CatGrads,
			"this rank's gradient partition: every parameter overlapping it, whole (DeepSpeed copy_grads_in_partition)")
	}
	z.bucket, z.hasPart, z.slices = 0, false, 0
}

// A grad_accum_dtype other than the model's (core.Precision.ZeroGradAccum)
// changes only the zero gradients' dtype here: grads_in_partition is in
// the model's (self.dtype, l.1678-1680), get_all_grad_tensors makes the
// zeros in the accumulation dtype (zeros_like(tensor, dtype=dtype)), and a
// later micro-batch's partition is added into the first one's
// (accumulated_grad.add_, l.943-945), in the model's dtype. The step's
// flat copy (optimizerStep) is torch.cat's promotion of both.

// zeroEpilogue is independent_gradient_partition_epilogue, before the
// buckets are released: the last reduction, then the zero gradients. A
// step's first micro-batch keeps both; a later one adds them into the
// kept ones, and they and its grads_in_partition are freed once the
// buckets are (backwardEnd releases drop).
func (d *distState) zeroEpilogue(r *Replay) (drop []int32) {
	z := d.zg
	d.zeroReduce(r)
	var zeros int32 = none
	if z.zeros > 0 {
		gt := r.Plan.Precision.Grads
		zeros = d.alloc(r, "zero gradients", []int64{z.zeros}, gt, gt.Bytes(z.zeros), core.CatGrads,
			"zeros_like of each parameter of this rank's partition the step gives no gradient (DeepSpeed get_all_grad_tensors)")
	}
	if z.held == none && z.heldZ == none {
		z.held, z.heldZ, z.cur = z.cur, zeros, none
		return nil
	}
	drop = []int32{z.cur, zeros}
	z.cur = none
	return drop
}

// zeroSetup holds what a step's earlier micro-batches kept: their
// grads_in_partition and zero gradients.
func (d *distState) zeroSetup(r *Replay) {
	z := d.zg
	prec := r.Plan.Precision
	if z.numel > 0 {
		z.held = d.alloc(r, "grads_in_partition", []int64{z.numel}, prec.Params, prec.Params.Bytes(z.numel), core.CatGrads,
			"this rank's gradient partition, accumulated over the micro-batches before this one")
	}
	if gt := prec.Grads; z.zeros > 0 {
		z.heldZ = d.alloc(r, "zero gradients", []int64{z.zeros}, gt, gt.Bytes(z.zeros), core.CatGrads,
			"zeros_like of each parameter of this rank's partition the step gives no gradient, kept from the first micro-batch")
	}
}

// zeroFree frees the kept gradients (step(): averaged_gradients[i] = None).
func (d *distState) zeroFree(r *Replay) {
	z := d.zg
	for _, id := range []*int32{&z.held, &z.heldZ} {
		if *id != none {
			r.release(*id)
			*id = none
		}
	}
}

// zero1Reduce is stage 1's reduce_gradients at the accumulation boundary,
// before its epilogue: each gradient of the flat groups, in their order,
// goes through the bucket (zeroHook), which frees autograd's tensor.
func (d *distState) zero1Reduce(r *Replay) {
	for _, g := range d.groups(true) {
		for _, pi := range g.params {
			if r.paramGrad[pi] != none {
				d.zeroHook(r, pi)
				r.release(r.paramGrad[pi])
				r.paramGrad[pi] = none
			}
		}
	}
}
