package sim

import (
	"fmt"
	"strings"
)

// Data-parallel sharding: what each GPU holds of the parameters, gradients
// and optimizer state, and when the sharded parts are gathered. The modes:
//
//   - replicated: no data-parallel wrapper (tp/pp/cp/ep alone, dp=1): the
//     one-GPU setup with this rank's share of the layers.
//   - ddp: PyTorch DistributedDataParallel. Everything replicated; the
//     reducer allocates flat bucket tensors holding a copy of every
//     trainable gradient when it is built (c10d/reducer.cpp
//     initialize_buckets: bucket.gradients = at::empty(...); with the
//     default gradient_as_bucket_view=False the gradients are copied in and
//     out of them), bucket_cap_mb=25, the first bucket 1 MiB.
//   - megatron: Megatron-LM's DDP (megatron/core/distributed/
//     param_and_grad_buffer.py): parameters and a persistent main-gradient
//     buffer in the gradient dtype (fp32 with --bf16), the weight
//     gradients accumulated straight into it (gradient-accumulation
//     fusion); with the distributed optimizer the fp32 master weights and
//     Adam state are sharded over dp (distrib_optimizer.py), 6 + 12/dp
//     bytes per parameter (docs/.../dist_optimizer.md; Megatron-LM #654).
//   - zero: DeepSpeed ZeRO (Rajbhandari et al. 2019), stage 1 and 2 in
//     deepspeed/runtime/zero/stage_1_and_2.py, stage 3 in stage3.py and
//     partitioned_param_coordinator.py. Details at each function.
//   - fsdp: PyTorch FSDP2 (torch.distributed.fsdp.fully_shard, files
//     _fsdp_param.py, _fsdp_param_group.py, _fsdp_collectives.py), one
//     unit per repeated block and one for the rest (the root).
type distMode uint8

const (
	distReplicated distMode = iota
	distDDP
	distMegatron
	distZeRO
	distFSDP
)

// DeepSpeed and PyTorch defaults.
const (
	zeroReduceBucket   = 500_000_000   // reduce_bucket_size (zero/config.py), elements
	zeroPrefetchBucket = 50_000_000    // stage3_prefetch_bucket_size, elements
	zeroPersistence    = 100_000       // stage3_param_persistence_threshold, elements
	zeroMaxLive        = 1_000_000_000 // stage3_max_live_parameters, elements
	zeroSubGroup       = 1_000_000_000 // sub_group_size, elements
	ddpBucketCap       = 25 << 20      // DistributedDataParallel(bucket_cap_mb=25)
	ddpFirstBucket     = 1 << 20       // dist._DEFAULT_FIRST_BUCKET_BYTES
)

// gatherUnit is a set of parameters gathered together (ZeRO-3: a module;
// FSDP: a block, or the root).
type gatherUnit struct {
	name        string
	params      []int32
	numel       int64 // unsharded elements
	first, last int32 // first and last forward op reading it
	keep        bool  // never resharded (persistent small params)
	root        bool  // FSDP root: kept from forward through backward
	tensor      int32 // the gathered parameters, none when sharded
	grad        int32 // FSDP: its sharded gradient, none until reduced
	trainable   bool  // holds a parameter that requires grad
	flatGrad    int32 // FSDP1: the unsharded gradient of the whole unit
}

// distState is the distributed part of one replay.
type distState struct {
	mode     distMode
	par      Parallelism
	plan     *Plan
	p        *program
	dp, edp  int64 // sharding degrees of dense and expert parameters
	gatherDT DType // dtype of gathered parameters and their unsharded grads

	units   []gatherUnit
	unitOf  []int32 // by parameter, -1 when not gathered
	opUnits [][]int32
	order   []int32 // units by first forward use

	seeds map[int32][]stageOut // pipeline outputs by producer op

	ipg      int32 // ZeRO-1/2 reduce bucket, live during backward
	gradPart int32 // ZeRO-1/2 grads_in_partition

	fsdp1  bool // FullyShardedDataParallel semantics (fsdp1.go)
	noSync bool // FSDP1 micro-batch under no_sync(): gradients stay unsharded
}

// newDist returns the distributed state of a replay, nil on one GPU.
func newDist(plan *Plan, prog *program) *distState {
	if !plan.Parallel.Active() && prog.stage == nil {
		return nil
	}
	par := plan.Parallel.norm()
	d := &distState{par: par, plan: plan, p: prog, dp: par.DP, edp: max(par.DP/par.EP, 1),
		ipg: none, gradPart: none, gatherDT: plan.Precision.Params}
	switch {
	case par.FSDP:
		d.mode = distFSDP
		d.fsdp1 = par.FSDPVersion == 1
		d.noSync = d.fsdp1 && plan.GradAccum > 1
		if plan.Precision.Autocast {
			// MixedPrecisionPolicy(param_dtype=bf16): the all-gather casts.
			d.gatherDT = plan.Precision.Compute
		}
	case par.Zero > 0:
		d.mode = distZeRO
	case par.DistributedOptimizer || plan.Precision.Name == "megatron":
		d.mode = distMegatron
	case par.DP > 1:
		d.mode = distDDP
	}
	if prog.stage != nil {
		d.seeds = map[int32][]stageOut{}
		for _, o := range prog.stage.outputs {
			pr := prog.values[o.v].producer
			d.seeds[pr] = append(d.seeds[pr], o)
		}
	}
	if d.mode == distFSDP || (d.mode == distZeRO && par.Zero == 3) {
		d.buildUnits()
	}
	return d
}

// root returns the parameter pi stands for (tied weights share one).
func (d *distState) root(pi int32) int32 {
	if t := d.p.params[pi].tiedTo; t >= 0 {
		return t
	}
	return pi
}

// degree is the sharding degree of parameter pi: expert parameters are
// sharded over the expert-data-parallel group (dp/ep ranks hold the same
// experts; DeepSpeed-MoE and Megatron after PR #4687 alike).
func (d *distState) degree(pi int32) int64 {
	if isExpertRole(d.p.params[pi].role) {
		return d.edp
	}
	return d.dp
}

func isExpertRole(role string) bool { return len(role) > 7 && role[:7] == "expert_" }

// paramGroup is a set of parameters flattened together: the dense and the
// expert parameters (they shard over different groups), trainable ones
// only for the optimizer.
type paramGroup struct {
	name   string
	params []int32
	numel  int64
	n      int64 // sharding degree
}

func (d *distState) groups(trainable bool) []paramGroup {
	gs := []paramGroup{{name: "dense", n: d.dp}, {name: "expert", n: d.edp}}
	for pi := range d.p.params {
		p := &d.p.params[pi]
		if p.tiedTo >= 0 || p.trainable != trainable {
			continue
		}
		g := &gs[0]
		if isExpertRole(p.role) {
			g = &gs[1]
		}
		g.params = append(g.params, int32(pi))
		g.numel += p.numel
	}
	out := gs[:0]
	for _, g := range gs {
		if g.numel > 0 {
			out = append(out, g)
		}
	}
	return out
}

// zeroPartition is a ZeRO-1/2 flat partition: the group flattened and
// padded to a multiple of 2*n elements (nccl_start_alignment_factor = 2,
// flatten_dense_tensors_aligned), then split n ways.
func zeroPartition(numel, n int64) int64 {
	a := 2 * n
	return (numel + a - 1) / a * a / n
}

// ceilDiv is ceil(a/b).
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// fsdpShard is FSDP2's shard of a parameter: dim 0 chunked n ways, every
// rank padded to the first chunk's size (_fsdp_param.py, padded_sharded_size).
func fsdpShard(shape []int64, numel, n int64) int64 {
	if len(shape) == 0 || shape[0] == 0 {
		return ceilDiv(numel, n)
	}
	return ceilDiv(shape[0], n) * (numel / shape[0])
}

func (d *distState) alloc(r *replay, name string, shape []int64, dt DType, bytes int64, cat Category, why string) int32 {
	return r.allocate(Alloc{Tensor: name, Shape: shape, DType: dt, Bytes: bytes, Why: why, Cat: cat})
}

// setupStates allocates what exists before the step in the sharded modes
// and reports whether it did (the one-GPU setup runs otherwise; DDP adds
// its buckets first).
func (d *distState) setupStates(r *replay) bool {
	if d == nil {
		return false
	}
	for _, outs := range d.seeds {
		for _, o := range outs {
			if o.loss {
				r.holds[o.v]++
			}
		}
	}
	if r.plan.Phase == "eval" && d.mode != distZeRO && d.mode != distFSDP {
		return false
	}
	switch d.mode {
	case distDDP:
		d.setupDDP(r)
		return false
	case distMegatron:
		d.setupMegatron(r)
	case distZeRO:
		if d.par.Zero == 3 {
			d.setupZeRO3(r)
		} else {
			d.setupZeRO12(r)
		}
	case distFSDP:
		d.setupFSDP(r)
	default:
		return false
	}
	r.setupTableStates()
	return true
}

// setupDDP allocates the reducer's bucket tensors: trainable parameters in
// reverse order, a new bucket when the cap would be passed (the first
// bucket capped at 1 MiB), each bucket as large as its gradients.
func (d *distState) setupDDP(r *replay) {
	r.op = "DistributedDataParallel buckets"
	dt := r.plan.Precision.Grads
	var cur int64
	capB := int64(ddpFirstBucket)
	n := 0
	flush := func() {
		if cur == 0 {
			return
		}
		d.alloc(r, fmt.Sprintf("ddp bucket %d", n), []int64{cur / dt.Bytes(1)}, dt, cur, CatComm,
			"DDP gradient bucket (reducer.cpp initialize_buckets; gradients are copied in for the all-reduce)")
		n++
		cur = 0
		capB = ddpBucketCap
	}
	for pi := len(d.p.params) - 1; pi >= 0; pi-- {
		p := &d.p.params[pi]
		if p.tiedTo >= 0 || !p.trainable {
			continue
		}
		b := dt.Bytes(p.numel)
		if cur > 0 && cur+b > capB {
			flush()
		}
		cur += b
	}
	flush()
}

// setupMegatron: one parameter buffer, one main-gradient buffer (both
// full), fp32 master weights and optimizer state, sharded over dp with the
// distributed optimizer.
func (d *distState) setupMegatron(r *replay) {
	prec := r.plan.Precision
	st := &r.rep.States
	r.op = "model"
	for _, trainable := range []bool{true, false} {
		for _, g := range d.groups(trainable) {
			b := prec.Params.Bytes(g.numel)
			name := g.name + " parameters"
			if !trainable {
				name = "frozen " + g.name + " parameters"
			}
			d.alloc(r, name, []int64{g.numel}, prec.Params, b, CatParams, "parameters (Megatron param buffer)")
			st.Params += b
		}
	}
	r.op = "optimizer state"
	for _, g := range d.groups(true) {
		gb := prec.Grads.Bytes(g.numel)
		d.alloc(r, g.name+" main_grad buffer", []int64{g.numel}, prec.Grads, gb, CatGrads,
			"Megatron main-gradient buffer (persistent; weight gradients accumulate into it)")
		st.Grads += gb
		shard := g.numel
		if d.par.DistributedOptimizer {
			shard = ceilDiv(g.numel, g.n)
		}
		d.optimizerShard(r, g.name, shard, "distributed-optimizer shard")
	}
}

// optimizerShard allocates master weights and optimizer state for a flat
// shard of n elements.
func (d *distState) optimizerShard(r *replay, name string, n int64, why string) {
	prec := r.plan.Precision
	st := &r.rep.States
	if prec.Master != InvalidDType && prec.Master != prec.Params {
		b := prec.Master.Bytes(n)
		d.alloc(r, name+" master", []int64{n}, prec.Master, b, CatOptimizer, "fp32 master weights ("+why+")")
		st.Master += b
	}
	for _, s := range r.plan.Optimizer.states([]int64{n}, n, prec.States) {
		st.Optimizer += s.bytes
		if r.plan.Optimizer.Paged() {
			continue
		}
		d.alloc(r, name+" "+s.name, []int64{n}, prec.States, s.bytes, CatOptimizer, "optimizer state "+s.name+" ("+why+")")
	}
}

// setupZeRO12: the 16-bit parameters in one flat buffer per group
// (bit16_groups_flat), the fp32 master partition and optimizer state of
// this rank's flat partition. Stage 2 keeps this rank's gradient partition
// (grads_in_partition) between micro-batches when accumulating.
func (d *distState) setupZeRO12(r *replay) {
	prec := r.plan.Precision
	st := &r.rep.States
	r.op = "model"
	for _, trainable := range []bool{true, false} {
		for _, g := range d.groups(trainable) {
			b := prec.Params.Bytes(g.numel)
			d.alloc(r, g.name+" bit16 flat", []int64{g.numel}, prec.Params, b, CatParams, "16-bit parameters flattened (bit16_groups_flat)")
			st.Params += b
		}
	}
	r.op = "optimizer state"
	var part int64
	for _, g := range d.groups(true) {
		n := zeroPartition(g.numel, g.n)
		part += n
		d.optimizerShard(r, g.name+" partition", n, "ZeRO partition")
	}
	if d.par.Zero == 2 {
		st.Grads = prec.Grads.Bytes(part)
	} else {
		for _, g := range d.groups(true) {
			st.Grads += prec.Grads.Bytes(g.numel)
		}
	}
	if r.plan.gradsPersist() {
		if d.par.Zero == 2 {
			d.gradPart = d.alloc(r, "grads_in_partition", []int64{part}, prec.Grads, prec.Grads.Bytes(part), CatGrads, "this rank's gradient partition, accumulated over micro-batches")
		} else {
			r.op = "accumulated gradients"
			for pi := range d.p.params {
				r.paramGradient(int32(pi))
			}
		}
	}
}

// setupZeRO3: every parameter partitioned (ceil(numel/dp) elements each,
// flattened per sub-group), parameters under the persistence threshold
// kept whole as well, fp32 master and optimizer state per sub-group, the
// gradient partitions (grad_partitions_flat_buffer) and the reduce bucket
// (__ipg_bucket_flat_buffer), both allocated at init and kept.
func (d *distState) setupZeRO3(r *replay) {
	prec := r.plan.Precision
	st := &r.rep.States
	r.op = "model"
	var trainPart int64
	for _, trainable := range []bool{true, false} {
		var sub int64
		k := 0
		flush := func() {
			if sub == 0 {
				return
			}
			b := prec.Params.Bytes(sub)
			d.alloc(r, fmt.Sprintf("fp16 partition %d", k), []int64{sub}, prec.Params, b, CatParams, "this rank's partition of the parameters (ZeRO-3)")
			st.Params += b
			if trainable {
				d.optimizerShard(r, fmt.Sprintf("sub-group %d", k), sub, "ZeRO-3 partition")
			}
			k++
			sub = 0
		}
		for pi := range d.p.params {
			p := &d.p.params[pi]
			if p.tiedTo >= 0 || p.trainable != trainable {
				continue
			}
			n := ceilDiv(p.numel, d.degree(int32(pi)))
			sub += n
			if trainable {
				trainPart += n
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
			un.tensor = d.alloc(r, un.name+" (persistent)", []int64{un.numel}, d.gatherDT, b, CatParams, "small parameters kept whole (stage3_param_persistence_threshold)")
			st.Params += b
		}
	}
	if r.plan.Phase == "eval" {
		return
	}
	gb := prec.Grads.Bytes(trainPart)
	d.alloc(r, "grad_partitions_flat_buffer", []int64{trainPart}, prec.Grads, gb, CatGrads, "this rank's gradient partitions (ZeRO-3, allocated at init)")
	st.Grads = gb
	d.alloc(r, "ipg bucket", []int64{zeroReduceBucket}, prec.Params, prec.Params.Bytes(zeroReduceBucket), CatComm, "ZeRO-3 reduce bucket (reduce_bucket_size elements, allocated at init)")
}

// setupFSDP: every parameter sharded along dim 0 (a DTensor shard), its
// optimizer state sharded alike; sharded gradients exist between
// micro-batches when accumulating.
func (d *distState) setupFSDP(r *replay) {
	if d.fsdp1 {
		d.setupFSDP1(r) // fsdp1.go
		return
	}
	prec := r.plan.Precision
	st := &r.rep.States
	r.op = "model"
	for pi := range d.p.params {
		p := &d.p.params[pi]
		if p.tiedTo >= 0 {
			continue
		}
		n := fsdpShard(p.shape, p.numel, d.degree(int32(pi)))
		b := prec.Params.Bytes(n)
		d.alloc(r, p.name+" shard", []int64{n}, prec.Params, b, CatParams, "this rank's shard of the parameter (FSDP)")
		st.Params += b
	}
	if r.plan.Phase == "eval" {
		return
	}
	r.op = "optimizer state"
	for pi := range d.p.params {
		p := &d.p.params[pi]
		if p.tiedTo >= 0 || !p.trainable {
			continue
		}
		d.optimizerShard(r, p.name, fsdpShard(p.shape, p.numel, d.degree(int32(pi))), "FSDP shard")
	}
	if r.plan.gradsPersist() {
		for u := range d.units {
			d.shardGrad(r, u)
		}
	}
}

// unitGradShard is the sharded gradient size of unit u, elements.
func (d *distState) unitGradShard(u int) int64 {
	var n int64
	for _, pi := range d.units[u].params {
		p := &d.p.params[pi]
		if p.trainable {
			n += fsdpShard(p.shape, p.numel, d.degree(pi))
		}
	}
	return n
}

// shardGrad allocates unit u's sharded gradient (first reduce-scatter).
func (d *distState) shardGrad(r *replay, u int) {
	un := &d.units[u]
	n := d.unitGradShard(u)
	if n == 0 || un.grad != none {
		return
	}
	dt := r.plan.Precision.Grads
	un.grad = d.alloc(r, un.name+" sharded grads", []int64{n}, dt, dt.Bytes(n), CatGrads, "sharded gradients of "+un.name+" (FSDP reduce-scatter output)")
	r.rep.States.Grads += dt.Bytes(n)
}

// buildUnits groups parameters into gather units and finds the ops that
// read them.
func (d *distState) buildUnits() {
	prog := d.p
	d.unitOf = fill(make([]int32, len(prog.params)), none)
	d.opUnits = make([][]int32, len(prog.ops))
	key := map[string]int32{}
	var blocks []string
	if d.mode == distFSDP {
		blocks = blockPrefixes(d.plan.Model)
	}
	unitFor := func(pi int32) int32 {
		if u := d.unitOf[pi]; u != none {
			return u
		}
		name := prog.params[pi].name
		k := moduleOf(name)
		root := false
		if d.mode == distFSDP {
			k, root = fsdpUnit(name, blocks)
		}
		u, ok := key[k]
		if !ok {
			u = int32(len(d.units))
			key[k] = u
			d.units = append(d.units, gatherUnit{name: k, first: none, last: none, tensor: none, grad: none, flatGrad: none, root: root})
			d.order = append(d.order, u)
		}
		d.unitOf[pi] = u
		un := &d.units[u]
		un.params = append(un.params, pi)
		un.numel += prog.params[pi].numel
		un.trainable = un.trainable || prog.params[pi].trainable
		return u
	}
	for i := range prog.ops {
		for _, pi := range prog.ops[i].params {
			u := unitFor(d.root(pi))
			if !containsUnit(d.opUnits[i], u) {
				d.opUnits[i] = append(d.opUnits[i], u)
			}
			un := &d.units[u]
			if un.first == none {
				un.first = int32(i)
			}
			un.last = int32(i)
		}
	}
	if d.mode == distZeRO {
		for u := range d.units {
			d.units[u].keep = d.units[u].numel < zeroPersistence
		}
	}
}

func containsUnit(us []int32, u int32) bool {
	for _, x := range us {
		if x == u {
			return true
		}
	}
	return false
}

// moduleOf is a parameter's module path ("layers.3.attn.q_proj").
func moduleOf(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i]
		}
	}
	return name
}

// fsdpUnit is the FSDP unit of a parameter: the repeated block whose path
// prefixes its name, else the root.
func fsdpUnit(name string, blocks []string) (string, bool) {
	for _, b := range blocks {
		if hasPathPrefix(name, b) {
			return b, false
		}
	}
	return "root", true
}

// hasPathPrefix reports whether name is under module path p, allowing
// leading scopes the lowering adds (pipeline micro-batches "mbK",
// ensemble members "memberK").
func hasPathPrefix(name, p string) bool {
	for {
		if len(name) > len(p) && name[:len(p)] == p && name[len(p)] == '.' {
			return true
		}
		i := 0
		for i < len(name) && name[i] != '.' {
			i++
		}
		if i >= len(name) {
			return false
		}
		name = name[i+1:]
	}
}

// blockPrefixes are the module paths of the blocks of the model's largest
// repeat(), as the lowering names them.
func blockPrefixes(m *Model) []string {
	s, err := splitStages(m, Parallelism{})
	if err != nil {
		return nil
	}
	var out []string
	for _, u := range s.blocks {
		var parts []string
		for _, a := range u.anc {
			if a.seq.Label() == "" {
				parts = append(parts, itoa(int64(a.index)))
			}
			if a.seq.Name != "" {
				parts = append(parts, a.seq.Name)
			}
		}
		if u.rep.Label() == "" {
			parts = append(parts, itoa(int64(u.index)))
		}
		name := u.rep.Name
		if name == "" {
			name = "layers"
		}
		parts = append(parts, name, itoa(u.block))
		out = append(out, strings.Join(parts, "."))
	}
	return out
}

// deepspeedPrecision is the plan as DeepSpeed runs a mixed-precision
// policy: DeepSpeed does not use torch.autocast; its "bf16"/"fp16" modes
// hold the model in the 16-bit dtype (parameters and gradients) and keep
// fp32 master weights and optimizer state in the ZeRO optimizer (the ZeRO
// paper's mixed-precision Adam). It reports false when nothing changes.
func (p *Plan) deepspeedPrecision() (*Plan, bool) {
	prec := p.Precision
	if p.Parallel.norm().Zero == 0 || !prec.Autocast {
		return nil, false
	}
	q := *p
	q.Precision = Precision{Name: prec.Name, Params: prec.Compute, Compute: prec.Compute, Grads: prec.Compute,
		Master: prec.Params, States: prec.States}
	if q.Precision.Master == q.Precision.Params {
		q.Precision.Master = FP32
	}
	return &q, true
}
