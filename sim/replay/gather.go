package replay

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The step-time side of sharding: gathering parameters before use and
// freeing them after (ZeRO-3, FSDP), what happens to gradients as the
// backward produces them, the pipeline's gradient seeds, and the sharded
// optimizer step. Each hook is a no-op on one GPU (nil *distState).
//
// ZeRO-3 (partitioned_param_coordinator.py): a module's parameters are
// all-gathered before its forward and released after it, unless smaller
// than stage3_param_persistence_threshold; upcoming modules (in the order
// traced on the first step) are prefetched while fewer than
// stage3_prefetch_bucket_size elements are in flight. The backward
// gathers them again in reverse order. Gradients are copied into the
// reduce bucket as each is completed and reduce-scattered into this
// rank's partition; the full gradient is freed.
//
// FSDP2: a unit's all-gather writes one flat buffer (world size times the
// padded shard) which is copied out to the unsharded parameters and freed
// (foreach_all_gather_copy_out); the unsharded parameters are freed after
// the unit's forward (reshard_after_forward=True) and gathered again for
// its backward. In the forward each unit is gathered in its own
// pre-forward, after the unit before has resharded: FSDP2's implicit
// prefetching overlaps the GPU's work, not the allocations (torch 2.15
// _fsdp_param_group.py; only set_modules_to_forward_prefetch gathers
// earlier), as TestFSDPLiveAgainstTorch measures; FSDP1 likewise, unless
// forward_prefetch=True (FullyShardedDataParallel's default is False;
// _runtime_utils.py _get_handle_to_prefetch), while ZeRO-3 gathers the
// next modules of its trace at a module's first op. The root unit (everything outside the blocks and fsdp_units) is
// not resharded after forward. reshard_after_forward=False keeps every
// unit gathered until its backward; reshard_after_forward=N keeps a 1/N
// shard of it in the gather dtype instead (_fsdp_param.py
// to_sharded_post_forward), freed once the backward's all-gather has
// rebuilt the unsharded parameters (to_unsharded). After a unit's backward its unsharded gradients (in the
// parameter dtype) are copied into a flat reduce-scatter input in the
// reduce dtype (foreach_reduce_scatter_copy_in), freed, and
// reduce-scattered into the sharded gradient.

// gatheredSize is the padded unsharded size of unit u, elements of the
// gather dtype (quantized weights count their codes in their storage
// dtype, which FSDP1 requires to be the parameters').
func (d *distState) gatheredSize(u int32) int64 {
	if d.fsdp1 {
		return ceilDiv(d.units[u].numel, d.dp) * d.dp // one flat parameter, padded
	}
	var n int64
	for _, pi := range d.units[u].params {
		p := &d.p.Params[pi]
		k := d.Degree(pi)
		if d.Mode == DistFSDP {
			n += fsdpShard(p.Shape, p.Numel, k) * k
		} else {
			n += ceilDiv(d.elems(pi), k) * k
		}
	}
	return n
}

// gatheredBytes is the bytes the all-gather of unit u writes: the gather
// dtype's, with quantized weights in their own storage.
func (d *distState) gatheredBytes(u int32) int64 {
	if d.fsdp1 {
		return d.gatherDT.Bytes(d.gatheredSize(u))
	}
	var b int64
	for _, pi := range d.units[u].params {
		p := &d.p.Params[pi]
		k := d.Degree(pi)
		switch {
		case p.Quant != "" && d.Mode == DistFSDP:
			b += d.quantGathered(pi, k)
		case p.Quant != "":
			b += d.quantStorageDT().Bytes(ceilDiv(d.quantCodes(pi), k) * k)
		case p.GatherFP8 && d.Mode == DistFSDP: // torchao's float8 all-gather (core/float8.go)
			b += units.FP8.Bytes(fsdpShard(p.Shape, p.Numel, k) * k)
		case d.Mode == DistFSDP:
			b += d.gatherDT.Bytes(fsdpShard(p.Shape, p.Numel, k) * k)
		default:
			b += d.gatherDT.Bytes(ceilDiv(p.Numel, k) * k)
		}
	}
	return b
}

// gather all-gathers unit u unless it is gathered.
func (d *distState) gather(r *Replay, u int32) {
	un := &d.units[u]
	if un.tensor != none {
		return
	}
	if !un.keep && un.pending == none { // a prefetched one is counted
		d.live += un.numel
	}
	n, b := d.gatheredSize(u), d.gatheredBytes(u)
	dt := d.gatherDT
	if d.fsdp1 {
		d.rateLimit(r)                // limit_all_gathers (streams.go)
		in := d.fsdp1PreUnshard(r, u) // _mp_shard, the shard from the host (fsdp1_offload.go)
		un.tensor = d.allocOn(r, StreamAllGather, un.name+" unsharded flat parameter", []int64{n}, dt, b, core.CatComm, "unsharded FlatParameter of "+un.name+" (FSDP1 all-gathers into it on the unshard stream; freed at reshard)")
		if in != none {
			r.release(in)
		}
		return
	}
	if d.Mode == DistFSDP {
		flat := un.pending
		if flat == none {
			flat = d.allGather(r, u, n, b)
		} else {
			un.pending = none
			d.pendingN--
		}
		d.freeKeptAllGatherOutput(r) // the previous unit's (streams.go)
		un.tensor = d.allocUnit(r, r.stream, un, n, Alloc{Tensor: " unsharded parameters", DType: dt, Bytes: b, Why: un.name},
			"unsharded parameters of ", " (FSDP; freed at reshard)")
		d.releaseAllGatherOutput(r, flat)
		if un.postFwd != none {
			r.release(un.postFwd)
			un.postFwd = none
		}
		return
	}
	var host int32 = none
	if d.zeroParamOffload(r) { // the partition comes from host memory first
		part := d.partitionOf(u)
		host = d.alloc(r, un.name+" partition from host", []int64{part}, dt, dt.Bytes(part), core.CatComm, "GPU copy of this rank's host partition of "+un.name+", the all-gather's input (ZeRO-3 offload_param)")
		// Every micro-batch gathers again (the replay replays one), so the
		// copy runs once per micro-batch, as nvmeGatherRead counts its reads
		// and FSDP's offload its copies (offloadRepeats). It runs on the
		// all-gather stream in the chain of the prefetched gathers, as
		// FSDP's copies do (copyDown; fsdp_offload.go FsdpOffloadPCIe).
		d.copyDown(r, dt.Bytes(part)*d.offloadRepeats())
		d.nvmeGatherRead(r, u) // ZeRO-Infinity: read from NVMe first (offload_nvme.go)
	}
	un.tensor = d.alloc(r, un.name+" gathered", []int64{n}, dt, b, core.CatComm, "all-gathered parameters of "+un.name+" (ZeRO-3; released after use)")
	if host != none {
		r.release(host)
	}
}

// allGather is FSDP2's foreach_all_gather for unit u: its flat output of
// n elements, b bytes, on the all-gather copy-in stream (with CPU
// offload, after the shards' copies to the GPU).
func (d *distState) allGather(r *Replay, u int32, n, b int64) int32 {
	un := &d.units[u]
	var fromHost []int32
	if d.FsdpOffload(r) {
		fromHost = d.fsdpShardsToGPU(r, u)
	}
	flat := d.allocUnit(r, StreamAllGather, un, n, Alloc{Tensor: " all-gather output", DType: d.gatherDT, Bytes: b, Why: un.name},
		"FSDP all-gather output of ", " (on the all-gather copy-in stream; copied out to the unsharded parameters)")
	for _, id := range fromHost {
		r.release(id)
	}
	return flat
}

// prefetchBackward is FSDP2's backward prefetch of unit u: the all-gather
// alone (_backward_prefetch's unshard(async_op=True)); its copy-out to the
// unsharded parameters waits for u's own pre-backward (wait_for_unshard,
// gather), after the unit before it has resharded and reduce-scattered.
func (d *distState) prefetchBackward(r *Replay, u int32) {
	un := &d.units[u]
	if un.tensor != none || un.pending != none {
		return
	}
	if !un.keep {
		d.live += un.numel
	}
	un.pending = d.allGather(r, u, d.gatheredSize(u), d.gatheredBytes(u))
	d.pendingN++
}

// reshard frees unit u's gathered parameters.
func (d *distState) reshard(r *Replay, u int32) {
	un := &d.units[u]
	if un.tensor == none || un.keep {
		return
	}
	if d.fsdp1 {
		d.freeUnsharded(r, un.tensor) // recorded on the compute stream (streams.go)
	} else {
		r.release(un.tensor)
	}
	un.tensor = none
	d.live -= un.numel
}

// prefetch gathers the units after (forward) or before (backward) unit u
// in first-use order: one unit for FSDP, up to the prefetch bucket for
// ZeRO-3 (and never past max_live_parameters).
func (d *distState) prefetch(r *Replay, u int32, forward bool) {
	if d.posOf == nil { // the order is fixed once the units are built
		d.posOf = make([]int, len(d.units))
		for k, x := range d.order {
			d.posOf[x] = k
		}
	}
	pos := d.posOf[u]
	step := 1
	if !forward {
		step = -1
	}
	var ahead int64
	live := d.live // a running count: summing the units at every prefetch was quadratic in their number
	for k, n := pos+step, 0; k >= 0 && k < len(d.order); k += step {
		v := d.order[k]
		un := &d.units[v]
		if un.keep || un.root || (!forward && un.reference) {
			continue
		}
		if d.Mode == DistFSDP {
			if n == 1 {
				return
			}
			if !forward && !d.fsdp1 {
				d.prefetchBackward(r, v)
			} else {
				d.gather(r, v)
			}
			n++
			continue
		}
		if ahead >= d.zs.PrefetchBucket || live+un.numel > d.zs.MaxLive {
			return
		}
		if un.tensor == none {
			d.gather(r, v)
			live += un.numel
		}
		ahead += un.numel
	}
}

func (d *distState) beforeForward(r *Replay, i int) {
	if d == nil || d.opUnits == nil {
		return
	}
	for _, u := range d.opUnits[i] {
		d.gather(r, u)
		if un := &d.units[u]; (un.first == int32(i) || un.refFirst == int32(i)) && (d.Mode != DistFSDP || d.fsdp1 && d.Par.ForwardPrefetch) {
			d.prefetch(r, u, true)
		}
	}
}

func (d *distState) afterForward(r *Replay, i int) {
	if d == nil || d.opUnits == nil {
		return
	}
	for _, u := range d.opUnits[i] {
		if un := &d.units[u]; (un.last == int32(i) || un.refLast == int32(i)) && !un.root {
			d.reshardAfterForward(r, u)
			if un.reference && d.Mode == DistFSDP {
				r.freeKeptAllGather() // the copy is its own FSDP2 root: its post-forward frees what it kept (streams.go)
			}
		}
	}
}

// reshardAfterForward applies FSDP's reshard_after_forward to unit u
// (ZeRO-3 always releases).
func (d *distState) reshardAfterForward(r *Replay, u int32) {
	un := &d.units[u]
	switch {
	case d.Mode != DistFSDP || r.Plan.Phase == core.Eval:
	case d.Par.NoReshard || d.pipeHold:
		return
	case d.Par.ReshardTo > 0 && un.tensor != none:
		n := d.gatheredSize(u) / d.Par.ReshardTo
		dt := d.gatherDT
		un.postFwd = d.alloc(r, un.name+" post-forward shard", []int64{n}, dt, d.gatheredBytes(u)/d.Par.ReshardTo, core.CatComm,
			fmt.Sprintf("1/%d of the unsharded parameters of %s, kept until its backward (reshard_after_forward=%d)", d.Par.ReshardTo, un.name, d.Par.ReshardTo))
	}
	d.reshard(r, u)
}

func (d *distState) beforeBackward(r *Replay, i int) {
	if d == nil {
		return
	}
	if i == len(d.p.Ops)-1 {
		d.backwardStart(r)
	}
	for _, o := range d.seedsOf(i) {
		vi := &d.p.Values[o.V]
		if o.Loss {
			r.gradT[o.V] = r.allocate(Alloc{Tensor: "grad of " + vi.Name, DType: units.FP32, Bytes: 4, Why: "seed gradient", Cat: core.CatTemporaries})
		} else if id, ok := d.seedBuf[o.V]; ok && vi.Grad {
			r.gradT[o.V] = id
		} else if vi.Grad {
			r.gradT[o.V] = r.allocate(Alloc{Tensor: "grad of " + vi.Name, Shape: vi.Shape, DType: vi.Dtype, Bytes: vi.Bytes, Why: "gradient received from the next pipeline stage", Cat: core.CatTemporaries})
		}
	}
	if d.opUnits == nil || r.Plan.Phase == core.Eval {
		return
	}
	if d.refOps != nil && d.refOps[i] { // DPO's reference forward over the policy's modules: no backward
		return
	}
	if d.pendingN > 0 {
		d.copyOutBeforeRecompute(r, i)
	}
	for _, u := range d.opUnits[i] {
		if d.units[u].reference { // DPO's reference copy: no backward
			continue
		}
		d.gather(r, u)
		if d.units[u].last == int32(i) && (!d.fsdp1 || d.Par.FSDP1Prefetch() == core.PrefetchPre) {
			d.prefetch(r, u, false)
		}
	}
}

// copyOutBeforeRecompute copies out the prefetched units whose ops a
// checkpointed region about to be recomputed at op i holds (runBackward's
// regions): FSDP2's pre-backward hook runs on the gradient of the unit's
// output, before autograd reaches the checkpoint inside it, so the
// recomputed forward finds the unsharded parameters there.
func (d *distState) copyOutBeforeRecompute(r *Replay, i int) {
	op := &d.p.Ops[i]
	if op.Region == 0 {
		return
	}
	var room [8]int32
	chain := r.P.AppendAncestors(room[:0], op.Region)
	for k := len(chain) - 1; k >= 0; k-- {
		reg := r.P.Regions[chain[k]-1]
		if r.Redone[chain[k]-1] || reg.NoGrad || reg.Offload {
			continue
		}
		for j := reg.First; j < reg.End; j++ {
			for _, u := range d.opUnits[j] {
				if d.units[u].pending != none {
					d.gather(r, u)
				}
			}
		}
	}
}

// seedsOf is the pipeline outputs op i produces, whose gradients the
// backward seeds there.
func (d *distState) seedsOf(i int) []core.StageOut {
	if d.seeded == nil || !d.seeded[i] {
		return nil
	}
	return d.seedsAt(i)
}

// seedsAt is seedsOf for an op that has seeds, apart so that seedsOf,
// asked at every op of the backward, stays inlined.
func (d *distState) seedsAt(i int) []core.StageOut {
	lo, _ := slices.BinarySearch(d.seedOps, int32(i))
	hi := lo + 1
	for hi < len(d.seedOps) && d.seedOps[hi] == int32(i) {
		hi++
	}
	return d.seeds[lo:hi:hi]
}

func (d *distState) afterBackward(r *Replay, i int) {
	if d == nil {
		return
	}
	for _, o := range d.seedsOf(i) {
		if o.Loss {
			r.unhold(o.V)
		}
	}
	op := &d.p.Ops[i]
	if d.Mode == DistZeRO && (d.Par.Zero >= 2 || d.Par.OverlapComm && d.zg != nil) {
		// Each completed gradient is copied into the reduce bucket and freed
		// (stage 1: with overlap_comm, at the accumulation boundary, the
		// replayed micro-batch).
		for _, pi := range op.Params {
			pi = d.root(pi)
			if r.paramLast[pi] == int32(i) && r.paramGrad[pi] != none {
				if d.zg != nil {
					d.zeroHook(r, pi) // a full bucket is reduced first
				}
				if d.zero3Hook(r, pi) { // kept until the reduction (zero3_reduce.go)
					continue
				}
				r.release(r.paramGrad[pi])
				r.paramGrad[pi] = none
			}
		}
	}
	if d.opUnits != nil {
		for _, u := range d.opUnits[i] {
			if d.units[u].first != int32(i) {
				continue
			}
			if d.fsdp1 {
				d.postBackwardFSDP1Ordered(r, u)
				continue
			}
			if d.pipeHold {
				continue // no reshard, no gradient sync before the last micro-batch
			}
			// FSDP2 post_backward reshards before it reduce-scatters.
			d.reshard(r, u)
			if d.Mode == DistFSDP {
				d.reduceScatter(r, u, true)
			}
		}
	}
	if d.pipeHold {
		d.chunkPostBackward(r, int32(i))
	}
	if i == 0 {
		d.backwardEnd(r)
	}
}

// backwardEnd: stage 2's epilogue (zeroEpilogue) reduces the last bucket
// and releases it; stage 1 first reduces the full gradients through it
// (zero1Reduce), keeps its partition and drops the rest.
func (d *distState) backwardEnd(r *Replay) {
	r.freeKeptRSInput() // FSDP2's root final callback
	if d.fsdp1 {
		d.flushPostBackwardFSDP1(r)
		for u := range d.units {
			d.reshard(r, int32(u)) // _catch_all_reshard in the final callback
		}
		d.releaseRecomputeInputs(r)   // _finalize_params removes the reshard-only hooks
		r.synchronize(r.alloc.Mark()) // the streams are done when the backward ends (streams.go)
		if d.FsdpOffload(r) {
			d.releaseSavedGradShards(r) // fsdp1_offload.go
		}
	}
	if d.Mode == DistZeRO && d.Par.Zero == 3 {
		d.zero3Reduce(r) // the last bucket (zero3_reduce.go)
	}
	if d.bf16opt && r.Plan.Phase != core.Eval {
		d.bf16Epilogue(r) // the gradients stay to the step (zero_accum.go)
		return
	}
	if d.ipg == none {
		return
	}
	if d.Par.Zero == 1 && d.zg != nil {
		d.zero1Reduce(r)
	}
	var drop []int32
	if d.zg != nil {
		drop = d.zeroEpilogue(r)
	}
	if d.Par.Zero == 1 { // what is left: offloaded (the reduced partition goes to the host), gradients outside the flat groups
		for pi := range d.p.Params {
			if r.paramGrad[pi] != none {
				r.release(r.paramGrad[pi])
				r.paramGrad[pi] = none
			}
		}
	}
	r.release(d.ipg)
	d.ipg = none
	if d.ipg2 != none {
		r.release(d.ipg2)
		d.ipg2 = none
	}
	for _, id := range drop { // a later micro-batch's, added into the kept ones
		if id != none {
			r.release(id)
		}
	}
}

// optimizerStep runs the sharded step and reports whether it replaced the
// default one. DeepSpeed and Megatron step with fused multi-tensor Adam
// (in place); DeepSpeed's copies before it are zero_step.go's. FSDP steps
// the sharded tensors with the plan's optimizer.
func (d *distState) optimizerStep(r *Replay) bool {
	if d == nil {
		return false
	}
	prec := r.Plan.Precision
	switch d.Mode {
	case DistMegatron:
		if r.Plan.Optimizer.Kind == core.Muon {
			r.muonEmergingStep() // muon_megatron.go
		}
		return true
	case DistZeRO:
		d.zeroStep(r) // zero_step.go
		return true
	case DistFSDP:
		if r.Plan.Optimizer.InBackward || d.FsdpOffload(r) { // offloaded: the step runs on the host
			return true
		}
		r.stepTemporaries(func(pi int) int64 {
			p := &d.p.Params[pi]
			return prec.States.Bytes(fsdpShard(p.Shape, p.Numel, d.Degree(int32(pi))))
		}, "temporaries of the "+r.Plan.Optimizer.Kind.String()+" step over the sharded parameters")
		return true
	}
	return false
}
