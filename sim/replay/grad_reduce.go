package replay

import "github.com/memsh/memsh/sim/core"

// Gradients as the backward produces them under sharding: where each
// parameter's gradient goes (gradient), FSDP's and ZeRO's reduce-scatter
// of a unit's gradients (reduceScatter, and FSDP2's input kept until the
// next unit's post-backward: freeKeptRSInput); ZeRO-1/2's gradient
// partitions are zero_grads.go's, the gathers gather.go's.

// gradient places parameter pi's gradient; it reports whether the default
// (a gradient in the plan's gradient dtype) is replaced.
func (d *distState) gradient(r *Replay, pi int32) bool {
	if d == nil {
		return false
	}
	switch d.Mode {
	case DistMegatron:
		return true // accumulated straight into the main-gradient buffer
	case DistFSDP:
		if d.fsdp1 {
			return d.gradientFSDP1(r, pi)
		}
		if d.pipeHold {
			d.pipeGradient(r, pi)
			return true
		}
		p := &d.p.Params[pi]
		dt := d.gatherDT
		r.paramGrad[pi] = r.allocateParts(Alloc{Tensor: ".grad", Shape: p.Shape, DType: dt, Bytes: dt.Bytes(p.Numel), Why: p.Name, Cat: core.CatGrads},
			allocParts{tensor: p.Name, why: "unsharded gradient of ", whyTail: " (FSDP, until the reduce-scatter)"})
		return true
	}
	return false
}

// reduceScatter is FSDP's post-backward for unit u. keep: the
// reduce-scatter input stays allocated until the next unit's
// post_backward or the backward's end (backwardEnd), as FSDP2 keeps it:
// torch 2.15's post_backward appends it to comm_ctx.reduce_scatter_states
// ("keep references to collective tensors produced in one stream and used
// in another", at most reduce_scatter_max_input_buffers = 1 of them) and
// drops the oldest before the next unit's foreach_reduce allocates its
// own; the root's final callback (_fsdp_state.py
// _root_post_backward_final_callback) drops the last. Torch 2.4 to 2.10
// kept one as comm_ctx.reduce_scatter_state, freed at the same points.
// tools/oracle/fsdp_live.py measured it on the CPU (sim/fsdp_live_test.go).
func (d *distState) reduceScatter(r *Replay, u int32, keep bool) {
	if d.noSync { // FSDP2 without gradient sync (fsdp2_no_sync.go)
		d.postBackwardNoSync(r, u)
		return
	}
	un := &d.units[u]
	var n int64
	for _, pi := range un.params {
		if d.p.Params[pi].Trainable {
			k := d.Degree(pi)
			n += fsdpShard(d.p.Params[pi].Shape, d.p.Params[pi].Numel, k) * k
		}
	}
	if keep {
		r.freeKeptRSInput() // the oldest state, before this unit's reduce
	}
	if n == 0 {
		return
	}
	dt := d.reduceDT
	in := d.allocUnit(r, r.stream, un, n, Alloc{Tensor: " reduce-scatter input", DType: dt, Bytes: dt.Bytes(n), Why: un.name},
		"FSDP reduce-scatter input of ", " (gradients in the reduce dtype)")
	for _, pi := range un.params {
		if r.paramGrad[pi] != none {
			r.release(r.paramGrad[pi])
			r.paramGrad[pi] = none
		}
	}
	if d.FsdpOffload(r) {
		d.fsdpGradToHost(r, u)
	} else if un.grad == none {
		d.shardGrad(r, int(u))
	} else {
		s := d.unitGradShard(int(u))
		r.release(d.allocOn(r, StreamReduceScatter, un.name+" reduce-scatter output", []int64{s}, dt, dt.Bytes(s), core.CatComm, "FSDP reduce-scatter output (on the reduce-scatter stream), added to the sharded gradient"))
	}
	if keep {
		r.keptRSInput = in
		return
	}
	r.release(in)
}

// freeKeptRSInput frees the reduce-scatter input FSDP2 kept (reduceScatter).
func (r *Replay) freeKeptRSInput() {
	if r.keptRSInput != none {
		r.release(r.keptRSInput)
		r.keptRSInput = none
	}
}

// backwardStart: DeepSpeed stage 1 and 2 allocate the reduce bucket when
// the backward starts (stage_1_and_2.py setup_buckets, at the first
// gradient hook, contiguous_gradients); stage 2 then fills this rank's
// gradient partition as buckets are reduced, stage 1 after the backward
// (zero_grads.go).
func (d *distState) backwardStart(r *Replay) {
	if d.Mode != DistZeRO || d.Par.Zero > 2 || r.Plan.Phase == core.Eval || d.bf16opt { // BF16_Optimizer has no bucket (zero_accum.go)
		return
	}
	dt, n := r.Plan.Precision.Params, d.zs.ReduceBucket
	d.ipg = d.alloc(r, "ipg bucket", []int64{n}, dt, dt.Bytes(n), core.CatComm, "DeepSpeed reduce bucket (reduce_bucket_size elements, allocated at each backward)")
	if d.Par.OverlapComm { // setup_buckets: double buffers with overlap_comm
		d.ipg2 = d.alloc(r, "ipg bucket 2", []int64{n}, dt, dt.Bytes(n), core.CatComm, "DeepSpeed's second reduce bucket (overlap_comm: double buffering, stage_1_and_2.py setup_buckets)")
	}
}
