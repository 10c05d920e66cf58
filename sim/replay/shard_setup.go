package replay

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// What each data-parallel mode holds before the step (sharding.go
// describes the modes).

// setupStates allocates what exists before the step in the sharded modes
// and reports whether it did (the one-GPU setup runs otherwise; DDP adds
// its buckets first).
func (d *distState) setupStates(r *Replay) bool {
	if d == nil {
		return false
	}
	d.seedHolds(r)
	d.setupTorchStage(r)
	if r.Plan.Phase == core.Eval && d.Mode != DistZeRO && d.Mode != DistFSDP {
		return false
	}
	switch d.Mode {
	case DistDDP:
		d.setupDDP(r)
		return false
	case DistMegatron:
		d.setupMegatron(r)
	case DistZeRO:
		if d.Par.Zero == 3 {
			d.setupZeRO3(r)
		} else {
			d.setupZeRO12(r)
		}
	case DistFSDP:
		d.setupFSDP(r)
	default:
		return false
	}
	r.setupTableStates()
	return true
}

// seedHolds holds the pipeline outputs that carry the loss.
func (d *distState) seedHolds(r *Replay) {
	for _, o := range d.seeds {
		if o.Loss {
			r.holds[o.V]++
		}
	}
}

// setupDDP allocates the reducer's bucket tensors: trainable parameters in
// reverse order, a new bucket when the cap would be passed (the first
// bucket capped at 1 MiB), each bucket as large as its gradients. The
// reducer keeps gradients of different dtypes in different buckets, each
// dtype with its own caps (compute_bucket_assignment_by_size keys its
// buckets by dtype): PEFT's fp32 adapters beside bf16 trainable weights.
func (d *distState) setupDDP(r *Replay) {
	r.op = "DistributedDataParallel buckets"
	prec := r.Plan.Precision
	var dts []units.DType
	for pi := len(d.p.Params) - 1; pi >= 0; pi-- {
		p := &d.p.Params[pi]
		if dt := p.GradDType(prec); p.TiedTo < 0 && p.Trainable && !slices.Contains(dts, dt) {
			dts = append(dts, dt)
		}
	}
	n := 0
	for _, dt := range dts {
		var cur int64
		capB := int64(ddpFirstBucket)
		flush := func() {
			if cur == 0 {
				return
			}
			d.alloc(r, fmt.Sprintf("ddp bucket %d", n), []int64{cur / dt.Bytes(1)}, dt, cur, core.CatComm,
				"DDP gradient bucket (reducer.cpp initialize_buckets; gradients are copied in for the all-reduce)")
			n++
			cur = 0
			capB = DdpBucketCap
		}
		for pi := len(d.p.Params) - 1; pi >= 0; pi-- {
			p := &d.p.Params[pi]
			if p.TiedTo >= 0 || !p.Trainable || p.GradDType(prec) != dt {
				continue
			}
			b := dt.Bytes(p.Numel)
			if cur > 0 && cur+b > capB {
				flush()
			}
			cur += b
		}
		flush()
	}
}

// setupMegatron: one parameter buffer, one main-gradient buffer (both
// full), fp32 master weights and optimizer state, sharded over dp with the
// distributed optimizer.
func (d *distState) setupMegatron(r *Replay) {
	prec := r.Plan.Precision
	st := &r.Rep.States
	r.op = "model"
	remap := d.remapsParams(r)
	var made map[string][]int32 // the model's own parameter tensors by group, before DDP remaps them
	if remap {
		made = d.modelParams(r)
	}
	for _, trainable := range []bool{true, false} {
		for _, g := range d.groups(trainable) {
			name := g.name + " parameters"
			if !trainable {
				name = "frozen " + g.name + " parameters"
			}
			why := "parameters (Megatron param buffer)"
			if g.mxfp8 > 0 { // core/te_fp8_params.go: the param buffer is a view of the gradient buffer
				why = "parameters in their own storage (the param buffer is a bf16 view of the gradient buffer: reuse_grad_buf_for_mxfp8_param_ag); the MXFP8 weights are module buffers"
			}
			n := g.numel - g.fp8 - g.mxfp8
			b := prec.Params.Bytes(n)
			d.alloc(r, name, []int64{n}, prec.Params, b, core.CatParams, why)
			st.Params += b
			if g.fp8 > 0 { // --fp8-param-gather (core/te_fp8_params.go)
				d.alloc(r, "fp8 "+name, []int64{g.fp8}, units.FP8, g.fp8, core.CatParams,
					"Transformer Engine's fp8 primary weights (Megatron's torch.uint8 param buffer, gathered in fp8)")
				st.Params += g.fp8
			}
			if remap && trainable { // the group's gradient buffer, then the model's tensors go
				d.gradBuffer(r, g)
				for _, id := range made[g.name] {
					r.release(id)
				}
			}
		}
	}
	r.op = "optimizer state"
	for _, g := range d.groups(true) {
		if !remap {
			d.gradBuffer(r, g)
		}
		shard := g.numel
		if d.Par.DistributedOptimizer {
			shard = ceilDiv(g.numel, g.n)
		}
		if d.ZeroOffload(r) || d.FsdpOffload(r) || r.Plan.Optimizer.Paged() {
			d.optimizerShard(r, g.name, shard, "distributed-optimizer shard")
			continue
		}
		if r.Plan.LayerWise() { // Muon's matrices owned whole (muon_megatron.go)
			d.megatronMainParams(r, d.layerWiseShards(r, g))
			continue
		}
		d.megatronMainParams(r, megatronShards(d.p, g, shard))
	}
}

// gradBuffer allocates group g's main-gradient buffer.
func (d *distState) gradBuffer(r *Replay, g paramGroup) {
	gb := r.Plan.Precision.Grads.Bytes(g.numel)
	d.alloc(r, g.name+" main_grad buffer", []int64{g.numel}, r.Plan.Precision.Grads, gb, core.CatGrads,
		"Megatron main-gradient buffer (persistent; weight gradients accumulate into it)")
	r.Rep.States.Grads += gb
}

// optimizerShard allocates master weights and optimizer state for a flat
// shard of n elements.
func (d *distState) optimizerShard(r *Replay, name string, n int64, why string) {
	if d.ZeroOffload(r) {
		d.offloadShard(r, n) // on the host
		return
	}
	prec := r.Plan.Precision
	if d.FsdpOffload(r) { // the optimizer steps on the host shards
		var states int64
		for _, s := range r.Plan.Optimizer.States([]int64{n}, n, prec.States) {
			states += s.Bytes
		}
		r.Rep.States.Optimizer += states
		r.fo().hostStates += states
		return
	}
	st := &r.Rep.States
	if prec.HasMaster() {
		b := prec.Master.Bytes(n)
		d.alloc(r, name+" master", []int64{n}, prec.Master, b, core.CatOptimizer, prec.Master.String()+" master weights ("+why+")")
		st.Master += b
	}
	for _, s := range r.Plan.Optimizer.States([]int64{n}, n, prec.States) {
		st.Optimizer += s.Bytes
		if r.Plan.Optimizer.Paged() {
			continue
		}
		a := Alloc{Tensor: name + " " + s.Name, Shape: []int64{n}, DType: prec.States, Bytes: s.Bytes, Why: "optimizer state " + s.Name + " (" + why + ")", Cat: core.CatOptimizer}
		if r.lazy { // made by the first step (lazy_states.go)
			r.pending = append(r.pending, a)
			continue
		}
		r.allocate(a)
	}
}

// setupZeRO12: the 16-bit parameters in one flat buffer per group
// (bit16_groups_flat), the fp32 master partition and optimizer state of
// this rank's flat partition. Stage 2 keeps this rank's gradient partition
// (grads_in_partition) and zero gradients between micro-batches when
// accumulating (zero_grads.go).
func (d *distState) setupZeRO12(r *Replay) {
	prec := r.Plan.Precision
	st := &r.Rep.States
	r.op = "model"
	for _, trainable := range []bool{true, false} {
		for _, g := range d.groups(trainable) {
			b := prec.Params.Bytes(g.numel)
			d.alloc(r, g.name+" bit16 flat", []int64{g.numel}, prec.Params, b, core.CatParams, "16-bit parameters flattened (bit16_groups_flat)")
			st.Params += b
		}
	}
	for pi := range d.p.Params { // frozen quantized weights stay out of the flat groups
		if p := &d.p.Params[pi]; p.TiedTo < 0 {
			r.quantParam(p)
		}
	}
	r.op = "optimizer state"
	var part int64
	for _, g := range d.groups(true) {
		n := ZeroPartition(g.numel, g.n)
		part += n
		d.optimizerShard(r, g.name+" partition", n, "ZeRO partition")
	}
	if r.Plan.Phase != core.Eval && !d.ZeroOffload(r) && !d.bf16opt {
		d.zg = d.zeroRank(r) // offloaded: the partition is on the host
	}
	switch {
	case d.bf16opt && r.Plan.Phase != core.Eval: // the fp32 groups and autograd's bf16 param.grad (zero_accum.go)
		st.Grads = d.setupBF16Optimizer(r) + prec.Params.Bytes(d.zero1GradNumel(r))
	case d.Par.Zero == 2 && d.zg != nil: // grads_in_partition in the model's dtype, the zeros in the accumulation dtype (zero_grads.go)
		st.Grads = prec.Params.Bytes(d.zg.numel) + prec.Grads.Bytes(d.zg.zeros)
	case d.Par.Zero == 2:
		st.Grads = prec.Grads.Bytes(part)
	default: // autograd's param.grad, in the parameters' dtype
		st.Grads = prec.Params.Bytes(d.zero1GradNumel(r))
	}
	if d.ZeroOffload(r) {
		n := d.largestTrainable()
		d.alloc(r, "temp_grad_buffer_for_gpu_offload", []int64{n}, prec.Params, prec.Params.Bytes(n), core.CatGrads,
			"GPU buffer of the largest parameter that host-accumulated gradients pass through (stage_1_and_2.py, cpu_offload)")
		d.offloadGradBuffers12(r, n, part)
		if d.Par.Zero == 2 {
			return
		}
	}
	r.generationPass() // GRPO's generate, before the accumulated gradients (generation.go)
	switch {
	case !r.Plan.GradsPersist():
	case d.Par.Zero == 2 && d.zg != nil:
		d.zeroSetup(r)
	case d.Par.Zero == 1:
		r.accumulatedGradients() // param.grad, None where the step gives none (zero1GradNumel)
	}
}

// zero1GradNumel is the elements of ZeRO-1's full gradients: those of
// the trainable parameters the step gives a gradient (gradlessParams).
// Stage 1 leaves the gradients to autograd's param.grad (or param.grad_accum
// when gradient_accumulation_dtype differs) until the accumulation
// boundary, and a parameter no op reaches keeps None there: the engine
// reduces only at the boundary (deepspeed/runtime/engine.py
// allreduce_gradients, l.2056 at DeepSpeed 38327e07), reduce_gradients
// skips a None grad (stage_1_and_2.py l.723, "if grad_reduc is not
// None"), and the backward hooks that fill the IPG bucket never fire for
// it (create_reduce_and_remove_grad_hooks, l.904). Stage 2 differs:
// grads_in_partition is sized by every parameter in the rank's partition,
// reached or not (copy_grads_in_partition, l.1344-1353).
func (d *distState) zero1GradNumel(r *Replay) int64 {
	var n int64
	for _, g := range d.groups(true) {
		for _, pi := range g.params {
			if !r.gradless[pi] {
				n += d.p.Params[pi].Numel
			}
		}
	}
	return n
}

// setupZeRO3: every parameter partitioned (ceil(numel/dp) elements each,
// flattened per sub-group), parameters under the persistence threshold
// kept whole as well, fp32 master and optimizer state per sub-group, the
// gradient partitions (grad_partitions_flat_buffer) and the reduce bucket
// (__ipg_bucket_flat_buffer), both allocated at init and kept.
func (d *distState) setupZeRO3(r *Replay) {
	prec := r.Plan.Precision
	st := &r.Rep.States
	r.op = "model"
	var trainPart int64
	nvmeParams := d.paramsOnNVMe(r)
	for _, trainable := range []bool{true, false} {
		var sub int64
		var subParams []int32 // the sub-group's parameters (ZeRO-Infinity's placement)
		k := 0
		if nvmeParams {
			d.nvmeParamGroup(r, d.partitionTotal(trainable), trainable)
		}
		flush := func() {
			if sub == 0 {
				return
			}
			b := prec.Params.Bytes(sub)
			switch {
			case nvmeParams && trainable:
				d.nvmeParamSubGroup(r, sub, subParams) // the group's pinned flat buffer or NVMe (offload_nvme.go)
			case nvmeParams: // counted per parameter below
			case d.zeroParamOffload(r):
				r.fo().hostParams += b // pinned on the host
			default:
				d.alloc(r, fmt.Sprintf("fp16 partition %d", k), []int64{sub}, prec.Params, b, core.CatParams, "this rank's partition of the parameters (ZeRO-3)")
			}
			st.Params += b
			if trainable {
				d.optimizerShard(r, fmt.Sprintf("sub-group %d", k), sub, "ZeRO-3 partition")
				d.paramOnlyStepCopy(r, sub) // offload_param alone: the GPU-updated partition goes back to the host
			}
			k++
			sub = 0
			subParams = subParams[:0]
		}
		for pi := range d.p.Params {
			p := &d.p.Params[pi]
			if p.TiedTo >= 0 || p.Trainable != trainable {
				continue
			}
			if p.Quant != "" { // the codes in their float storage, partitioned on their own
				dt := d.quantStorageDT()
				n := ceilDiv(d.quantCodes(int32(pi)), d.Degree(int32(pi)))
				d.alloc(r, p.Name+" codes partition", []int64{n}, dt, dt.Bytes(n), core.CatParams, "this rank's partition of the 4-bit codes of "+p.Name+" (ZeRO-3, bnb_4bit_quant_storage)")
				st.Params += dt.Bytes(n)
				d.quantWhole(r, int32(pi))
				continue
			}
			n := ceilDiv(p.Numel, d.Degree(int32(pi)))
			sub += n
			subParams = append(subParams, int32(pi))
			if trainable {
				trainPart += n
			} else if nvmeParams && !d.nvmeFrozenParam(r, int32(pi), n) {
				r.fo().hostParams += prec.Params.Bytes(n) // too small to swap: on the host
			}
			if sub >= zeroSubGroup {
				flush()
			}
		}
		flush()
	}
	for u := range d.units {
		if d.units[u].keep {
			un := &d.units[u]
			b := d.gatherDT.Bytes(un.numel)
			un.tensor = d.alloc(r, un.name+" (persistent)", []int64{un.numel}, d.gatherDT, b, core.CatParams, "small parameters kept whole (stage3_param_persistence_threshold)")
			st.Params += b
		}
	}
	if r.Plan.Phase == core.Eval {
		return
	}
	gb := prec.Grads.Bytes(trainPart)
	if d.ZeroOffload(r) {
		r.fo().addGradBuffer(prec.Grads, gb) // grad_partitions_flat_buffer in pinned host memory (shard_offload.go)
	} else {
		d.alloc(r, "grad_partitions_flat_buffer", []int64{trainPart}, prec.Grads, gb, core.CatGrads, "this rank's gradient partitions (ZeRO-3, allocated at init)")
	}
	st.Grads = gb
	d.alloc(r, "ipg bucket", []int64{d.zs.ReduceBucket}, prec.Params, prec.Params.Bytes(d.zs.ReduceBucket), core.CatComm, "ZeRO-3 reduce bucket (reduce_bucket_size elements, allocated at init)")
}

// partitionTotal is this rank's partition of the trainable (or frozen)
// parameters that setupZeRO3 flattens, elements.
func (d *distState) partitionTotal(trainable bool) int64 {
	var n int64
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.TiedTo >= 0 || p.Trainable != trainable || p.Quant != "" {
			continue
		}
		n += ceilDiv(p.Numel, d.Degree(int32(pi)))
	}
	return n
}

// setupFSDP: every parameter sharded along dim 0 (a DTensor shard), its
// optimizer state sharded alike; sharded gradients exist between
// micro-batches when accumulating.
func (d *distState) setupFSDP(r *Replay) {
	if d.fsdp1 {
		d.setupFSDP1(r)
		return
	}
	prec := r.Plan.Precision
	st := &r.Rep.States
	r.op = "model"
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.TiedTo >= 0 {
			continue
		}
		if p.Quant != "" {
			d.quantShardFSDP2(r, int32(pi), d.Degree(int32(pi)))
			continue
		}
		n := fsdpShard(p.Shape, p.Numel, d.Degree(int32(pi)))
		b := prec.Params.Bytes(n)
		st.Params += b
		if d.FsdpOffload(r) {
			r.fo().hostParams += PinnedBlock(b) // pinned on the host (fsdp_offload.go)
			continue
		}
		d.alloc(r, p.Name+" shard", []int64{n}, prec.Params, b, core.CatParams, "this rank's shard of the parameter (FSDP)")
	}
	if r.Plan.Phase == core.Eval {
		return
	}
	r.op = "optimizer state"
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if !r.stepped(pi) {
			continue
		}
		d.optimizerShard(r, p.Name, fsdpShard(p.Shape, p.Numel, d.Degree(int32(pi))), "FSDP shard")
	}
	if d.pipeHold {
		d.holdStage(r)
		return
	}
	if d.FsdpOffload(r) { // the sharded gradients are host tensors
		d.hostGradShards(r)
		return
	}
	if d.noSync { // fsdp_no_sync: unsharded, no sharded gradient until the step's last micro-batch (fsdp2_no_sync.go)
		if r.Plan.KeepGrads { // zero_grad(set_to_none=False): the sharded gradients stay from the last step
			for u := range d.units {
				d.shardGrad(r, u)
			}
		}
		d.accumulators(r)
		return
	}
	if r.Plan.GradsPersist() {
		for u := range d.units {
			d.shardGrad(r, u)
		}
	}
}

// unitGradShard is the sharded gradient size of unit u, elements.
func (d *distState) unitGradShard(u int) int64 {
	var n int64
	for _, pi := range d.units[u].params {
		p := &d.p.Params[pi]
		if p.Trainable {
			n += fsdpShard(p.Shape, p.Numel, d.Degree(pi))
		}
	}
	return n
}

// shardGrad allocates unit u's sharded gradient (first reduce-scatter).
func (d *distState) shardGrad(r *Replay, u int) {
	un := &d.units[u]
	n := d.unitGradShard(u)
	if n == 0 || un.grad != none {
		return
	}
	dt := r.Plan.Precision.Grads
	un.grad = d.allocOn(r, StreamReduceScatter, un.name+" sharded grads", []int64{n}, dt, dt.Bytes(n), core.CatGrads, "sharded gradients of "+un.name+" (FSDP reduce-scatter output, on the reduce-scatter stream)")
	if !d.pipeHold { // a pipeline stage's gradient state is its unsharded accumulators (fsdp_pipeline.go)
		r.Rep.States.Grads += dt.Bytes(n)
	}
}
