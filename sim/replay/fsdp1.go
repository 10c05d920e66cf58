package replay

import "github.com/memsh/memsh/sim/core"

// FSDP1: torch.distributed.fsdp.FullyShardedDataParallel, as Lightning's
// FSDPStrategy (use_orig_params=True) and Hugging Face accelerate drive
// it in PyTorch 2.0-2.3. Where it differs from FSDP2 in memory:
//
//   - each unit's parameters are flattened into one FlatParameter,
//     sharded as flat chunks padded to the world size (flat_param.py);
//     the all-gather writes the padded unsharded FlatParameter directly;
//   - the FlatParameter requires grad when any of its parameters does
//     (the logical OR over them, _validate_tensors_to_flatten), and its
//     gradient is the whole flat tensor, frozen parameters included: "the
//     gradient memory usage will be higher than expected (namely,
//     equivalent to not freezing those parameters)" (FSDP docs; the
//     UserWarning of _wrap_utils.py quoted in Lightning-AI/litgpt#1538);
//   - a FlatParameter that does not require grad gets no post-backward
//     hook, so it stays unsharded until the backward ends
//     (pytorch/pytorch#95805; _catch_all_reshard in the final callback);
//   - inside no_sync() (Lightning's no_backward_sync while accumulating
//     gradients) there is no reduce-scatter: the unsharded gradients stay
//     and accumulate until the synchronising micro-batch (the
//     FullyShardedDataParallel.no_sync docstring). A plan with
//     grad_accum > 1 replays such a micro-batch: every unit that requires
//     grad holds its unsharded gradient from the start.
//
// With CPUOffload(offload_params=True) the shards live on the host:
// fsdp1_offload.go.

// FSDP1NoSync reports whether plan's replayed micro-batch runs under
// FSDP1's no_sync(): FullyShardedDataParallel with gradient accumulation,
// as Lightning (no_backward_sync) and Hugging Face accelerate (accumulate()
// without sync_each_batch) drive it. The unsharded gradients then
// accumulate and only the synchronising micro-batch reduce-scatters them
// (and, under CPU offload, copies the gradient shards to the host).
// parallel(fsdp_sync_each_batch=True) is the trainer that does not use
// it: each micro-batch reduce-scatters, and the sharded gradient,
// _saved_grad_shard, accumulates across them.
func FSDP1NoSync(plan *core.Plan) bool {
	par := plan.Parallel.Norm()
	return par.FSDP && par.FSDPVersion == 1 && plan.GradAccum > 1 && !par.SyncEachBatch
}

// setupFSDP1 allocates the flat shards, the optimizer state of the
// trainable parameters' shards and, under no_sync, the accumulated
// unsharded gradients.
func (d *distState) setupFSDP1(r *Replay) {
	prec := r.Plan.Precision
	st := &r.Rep.States
	r.op = "model"
	var moved []int32
	for pi := range d.p.Params { // bitsandbytes' quant_state, outside the flat parameters, made when the model was quantized
		if d.p.Params[pi].Quant != "" && d.p.Params[pi].TiedTo < 0 {
			var m *[]int32
			if d.quantRoundTrip(r, int32(pi)) {
				m = &moved
			}
			d.quantWholeIf(r, int32(pi), func(string) bool { return true }, true, m)
		}
	}
	for _, id := range moved { // peft moves them to the host (quantRoundTrip)
		r.release(id)
	}
	bufs, loose := d.fsdp1Buffers()
	for _, bi := range loose {
		r.setupBuffer(bi)
	}
	for _, u := range d.fsdp1WrapOrder() {
		n := d.gatheredSize(u) / d.dp
		b := prec.Params.Bytes(n)
		st.Params += b
		d.fsdp1Wrap(r, u, bufs[u])
		if d.FsdpOffload(r) { // pinned on the host with its _cpu_grad (fsdp1_offload.go)
			d.hostFlatShard(r, b)
		}
	}
	d.fsdp1WrapDone(r)
	d.fsdp1Idle = d.fsdp1IdleShards(r) // the parameters no op reads (fsdp1_idle.go)
	if r.Plan.Phase == core.Eval {
		return
	}
	r.op = "optimizer state"
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if !r.stepped(pi) {
			continue
		}
		d.optimizerShard(r, p.Name, ceilDiv(p.Numel, d.Degree(int32(pi))), "FSDP1 shard")
	}
	d.syncGradsToHost(r)
	if r.Plan.GradAccum > 1 && !d.noSync && !d.FsdpOffload(r) { // fsdp_sync_each_batch: the shards accumulated so far
		r.op = "accumulated gradients"
		for u := range d.units {
			d.savedGradShard(r, int32(u))
		}
	}
	if d.noSync {
		r.op = "accumulated gradients"
		for u := range d.units {
			if d.units[u].trainable {
				d.allocFlatGrad(r, int32(u), "accumulated under no_sync() since the last synchronising micro-batch")
			}
		}
	}
}

// savedGradShard allocates unit u's _saved_grad_shard accumulated by the
// micro-batches before the replayed one (fsdp_sync_each_batch): the
// reduce-scattered gradient shard in the parameters' dtype
// (castGradToParamDType), on the post-backward stream that made it. The
// replayed micro-batch's shard is added into it (postBackwardFSDP1).
func (d *distState) savedGradShard(r *Replay, u int32) {
	un := &d.units[u]
	if !un.trainable || un.grad != none {
		return
	}
	full := r.Plan.Precision.Params
	s := d.gatheredSize(u) / d.dp
	un.grad = d.allocOn(r, StreamReduceScatter, un.name+" sharded gradient", []int64{s}, full, full.Bytes(s), core.CatGrads,
		"_saved_grad_shard of "+un.name+": the sharded gradients of the micro-batches so far (FSDP1 without no_sync())")
	r.Rep.States.Grads += full.Bytes(s)
}

// allocFlatGrad allocates unit u's unsharded flat gradient.
func (d *distState) allocFlatGrad(r *Replay, u int32, why string) {
	un := &d.units[u]
	n := d.gatheredSize(u)
	dt := d.gatherDT
	un.flatGrad = d.alloc(r, un.name+" unsharded flat gradient", []int64{n}, dt, dt.Bytes(n), core.CatGrads,
		"gradient of the whole FlatParameter of "+un.name+", frozen parameters included (FSDP1); "+why)
	if d.noSync {
		r.Rep.States.Grads += dt.Bytes(n)
	}
}

// gradientFSDP1: the first gradient of a unit's parameter materialises
// the unit's whole flat gradient; later ones accumulate into it.
func (d *distState) gradientFSDP1(r *Replay, pi int32) bool {
	u := d.unitOf[pi]
	if u == none {
		return false
	}
	if d.units[u].flatGrad == none {
		d.allocFlatGrad(r, u, "reduce-scattered after the unit's backward")
	}
	return true
}

// postBackwardFSDP1Ordered runs unit u's post-backward when autograd
// does: at once, or under forward_prefetch after the backward of the unit
// before it (core.Parallelism.ForwardPrefetch): u's waits, and the unit
// after it, whose post-backward waited for u's backward, runs now. The
// root's own post-backward runs after any that waits.
func (d *distState) postBackwardFSDP1Ordered(r *Replay, u int32) {
	if !d.Par.ForwardPrefetch {
		d.postBackwardFSDP1(r, u)
		return
	}
	d.flushPostBackwardFSDP1(r)
	if d.units[u].root {
		d.postBackwardFSDP1(r, u)
		return
	}
	d.postWaiting = u
}

// flushPostBackwardFSDP1 runs the post-backward that waits, if any.
func (d *distState) flushPostBackwardFSDP1(r *Replay) {
	if d.postWaiting != none {
		u := d.postWaiting
		d.postWaiting = none
		d.postBackwardFSDP1(r, u)
	}
}

// reshardPostBackwardFSDP1 is FSDP1's _post_backward_reshard for unit
// u: reshard, then, under BACKWARD_POST, unshard the next unit of the
// backward, before u's gradient is reduce-scattered (core.PrefetchPost).
func (d *distState) reshardPostBackwardFSDP1(r *Replay, u int32) {
	d.reshard(r, u)
	if d.Par.FSDP1Prefetch() == core.PrefetchPost {
		d.prefetch(r, u, false)
	}
}

// postBackwardFSDP1 is _post_backward_hook for unit u: only FlatParameters
// that require grad have one; under no_sync it only reshards; otherwise it
// reduce-scatters the flat gradient into the sharded one and frees it.
func (d *distState) postBackwardFSDP1(r *Replay, u int32) {
	un := &d.units[u]
	if !un.trainable {
		// No gradient, so no post-backward hook: since PyTorch 2.1 a
		// reshard-only hook on the unit's inputs reshards it when their
		// gradients are computed (_register_post_backward_reshard_only_hook);
		// a unit whose inputs need no gradient (the root, after a frozen
		// embedding) stays gathered until the backward ends
		// (pytorch/pytorch#95805).
		if d.inputsNeedGrad(u) {
			d.reshardPostBackwardFSDP1(r, u)
		}
		return
	}
	d.reshardPostBackwardFSDP1(r, u)
	if d.noSync || un.flatGrad == none {
		return
	}
	dt := d.reduceDT
	s := d.gatheredSize(u) / d.dp
	if dt != d.gatherDT {
		// _post_backward_hook casts the unsharded gradient to reduce_dtype
		// on the post-backward stream before the reduce-scatter
		// (flat_param.grad.to(handle._reduce_dtype), _runtime_utils.py at
		// fe03cf693c); the gather-dtype gradient is recorded there and freed.
		n := d.gatheredSize(u)
		cast := d.allocOn(r, StreamReduceScatter, un.name+" unsharded flat gradient in reduce_dtype", []int64{n}, dt, dt.Bytes(n), core.CatGrads,
			"gradient of the whole FlatParameter of "+un.name+" cast to reduce_dtype for its reduce-scatter (FSDP1)")
		r.recordStream(un.flatGrad, StreamReduceScatter)
		r.release(un.flatGrad)
		un.flatGrad = cast
	}
	out := d.allocOn(r, StreamReduceScatter, un.name+" reduce-scatter output", []int64{s}, dt, dt.Bytes(s), core.CatGrads, "sharded gradient of "+un.name+" (FSDP1 reduce-scatter, on the post-backward stream)")
	r.recordStream(un.flatGrad, StreamReduceScatter) // read by the reduce-scatter (streams.go)
	r.release(un.flatGrad)
	un.flatGrad = none
	out = d.castGradToParamDType(r, u, out)
	if d.FsdpOffload(r) {
		d.fsdp1GradToHost(r, u, out)
		return
	}
	if un.grad == none {
		un.grad = out
		r.Rep.States.Grads += r.Plan.Precision.Params.Bytes(s)
	} else {
		r.release(out) // _saved_grad_shard += sharded_grad
	}
}

// castGradToParamDType is _accumulate_sharded_grad's
// _cast_grad_to_param_dtype (pytorch/pytorch fe03cf693c,
// torch/distributed/fsdp/_runtime_utils.py): under parameter mixed
// precision the reduce-scatter's output (out, in reduce_dtype) is
// cast to the parameters' own dtype on the post-backward stream and the
// low-precision output freed, with or without CPU offload; the cast is
// what becomes _saved_grad_shard and, at the backward's end, the
// FlatParameter's .grad (prepare_gradient_for_optim). It returns the
// tensor that holds the sharded gradient.
func (d *distState) castGradToParamDType(r *Replay, u int32, out int32) int32 {
	full := r.Plan.Precision.Params
	if full == d.reduceDT {
		return out
	}
	un := &d.units[u]
	s := d.gatheredSize(u) / d.dp
	cast := d.allocOn(r, StreamReduceScatter, un.name+" sharded gradient", []int64{s}, full, full.Bytes(s), core.CatGrads,
		"sharded gradient of "+un.name+" cast to the parameters' dtype (FSDP1 _cast_grad_to_param_dtype), kept as _saved_grad_shard until the backward ends")
	r.release(out)
	return cast
}

// inputsNeedGrad reports whether an op reading unit u's parameters has an
// input that requires grad (the unit's forward input does).
func (d *distState) inputsNeedGrad(u int32) bool {
	un := &d.units[u]
	for i := un.first; i <= un.last; i++ {
		if !containsUnit(d.opUnits[i], u) {
			continue
		}
		for _, v := range d.p.Ops[i].In {
			if d.p.Values[v].Grad {
				return true
			}
		}
	}
	return false
}
