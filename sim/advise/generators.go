package advise

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Goal is what advice looks for.
type Goal uint8

const (
	// Fit: the cheapest changes that make the step fit, ranked by step
	// time.
	Fit Goal = iota
	// Speed: changes that make a fitting step faster and still fit.
	Speed
)

// String is the goal as advise() takes it.
func (g Goal) String() string {
	if g == Speed {
		return "speed"
	}
	return "fit"
}

// generator makes the changes of one knob for a plan. A new knob is one
// entry in generators.
type generator struct {
	Knob string
	Doc  string // what the knob changes, for the documentation
	// Gen lists the knob's changes to p: those that may save memory,
	// and for Speed also those that may save time (a memory saver pairs
	// with a speed-up that does not fit alone). A change the plan rejects
	// (a layout that does not divide) is dropped after the fact.
	Gen func(p *core.Plan, ask Ask) []Change
}

// Ask is what the advice looks for: the goal and the device memory the
// step may use.
type Ask struct {
	Goal   Goal
	Budget int64
	// HostShort: the plan as given fails train(host_memory=)'s check
	// (Result.Host): the offload knob also offers ZeRO-Infinity's NVMe
	// tier for what is on the host.
	HostShort bool
}

// generators are the knobs advice turns, in the order rows tie-break.
var generators = []generator{
	{"micro_batch", "a smaller micro-batch with more gradient accumulation, the same global batch (speed: a larger one)", microBatchChanges},
	{"checkpoint", "activation checkpointing: selective, every other block, torchtitan's per-op policy, full, non-reentrant, or the least recompute that fits (checkpoint(budget=...)); for speed, less of it", checkpointChanges},
	{"compile", "torch.compile of each block and the loss: the min-cut partitioner saves less, fused kernels run faster", compileChanges},
	{"precision", "bf16 autocast over fp32 weights, or pure bf16 weights and states", precisionChanges},
	{"adapter_dtype", "PEFT's LoRA adapters in the model's dtype (get_peft_model(autocast_adapter_dtype=False)), not fp32: half their state, no fp32 copies of the adapted inputs", adapterDTypeChanges},
	{"optimizer", "AdamW's fused step, 8-bit or paged 8-bit state, the step in the backward", optimizerChanges},
	{"loss_chunks", "the output layer and cross-entropy in 8 chunks (torchtune's num_output_chunks)", lossChunkChanges},
	{"sharding", "ZeRO stage 1-3, FSDP or Megatron's distributed optimizer over the data-parallel GPUs; FSDP's resharding and HSDP replicas; FSDP1 without prefetching, ZeRO's buckets at the Hugging Face Trainer's auto sizes", shardingChanges},
	{"offload", "optimizer state, parameters or activations in host memory; for speed, or when the host falls short, an offload taken back to the GPU (or from NVMe to the host)", offloadChanges},
	{"expandable_segments", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", expandableChanges},
	{"vllm_sleep", "a GRPO step's colocated vLLM engine asleep between generations (vllm_enable_sleep_mode): its memory off the GPU through the step (its wake-up and weight reload, in the generation phase, are not in the step time)", vllmSleepChanges},
	{"members_mode", "an ensemble's members one at a time", memberChanges},
	{"graph", "a graph model's edge chunks, eval chunks and processor segments", graphChanges},
	{"table_placement", "a sparse table's rows and moments in host memory", tableChanges},
	{"layout", "tensor or pipeline parallelism over the same GPUs", layoutChanges},
	{"schedule", "a pipeline's schedule: 1F1B, zero bubble (zb-h1, zb-v), interleaved or DualPipe", scheduleChanges},
	{"cp_mode", "context parallelism by ring attention or by Ulysses' all-to-all", cpModeChanges},
	{"expert_tp", "a MoE's experts whole on each tensor-parallel rank (expert_tp=1), or split with tp", expertTPChanges},
}

// one is a change of one keyword.
func one(knob, keyword string, v any) Change {
	return Change{Knob: knob, Settings: []Setting{{keyword, v}}}
}

// microBatchChanges split the micro-batch (b/2, b/4, ... and 1) and
// accumulate more, keeping the global batch; for speed they merge
// accumulated micro-batches into larger ones.
func microBatchChanges(p *core.Plan, ask Ask) []Change {
	if p.Parallel.MicroBatches > 0 { // a pipeline's micro-batch count is set on its own
		return nil
	}
	var out []Change
	mb := func(b, ga int64) Change {
		return Change{Knob: "micro_batch", Settings: []Setting{{"batch", b}, {"grad_accum", ga}}}
	}
	b := p.Batch
	for b%2 == 0 {
		b /= 2
		out = append(out, mb(b, p.GradAccum*(p.Batch/b)))
	}
	if b > 1 {
		out = append(out, mb(1, p.GradAccum*p.Batch))
	}
	if ask.Goal == Speed {
		for k := int64(2); k <= p.GradAccum; k *= 2 {
			if p.GradAccum%k != 0 {
				break
			}
			out = append(out, mb(p.Batch*k, p.GradAccum/k))
		}
	}
	return out
}

// blocks counts the repeated blocks of a model (what checkpoint="full"
// and every=k checkpoint).
func blocks(m *core.Model) int64 {
	var n int64
	for _, l := range m.Layers {
		core.Walk(l, "", func(_ string, x core.Layer) {
			if r, ok := x.(*core.Repeat); ok {
				n += r.Count()
			}
		})
	}
	return n
}

// checkpointChanges checkpoint more (or, for speed, less) of the model.
func checkpointChanges(p *core.Plan, ask Ask) []Change {
	cur := p.Checkpoint
	if cur.Mode == "" {
		cur.Mode = "none"
	}
	n := blocks(p.Model)
	var out []Change
	add := func(c core.Checkpoint) {
		if c.Mode != cur.Mode || c.Every != cur.Every || c.Reentrant != cur.Reentrant {
			if c.Mode == "op" {
				c.Reentrant = false
			}
			out = append(out, one("checkpoint", "checkpoint", c))
		}
	}
	if cur.Reentrant { // non-reentrant keeps less (checkpoint.go)
		c := cur
		c.Reentrant = false
		add(c)
	}
	op := core.Checkpoint{Mode: "op", Save: core.DefaultSaveOps()} // torchtitan's per-op policy
	more := map[string][]core.Checkpoint{
		"none":      {{Mode: "selective", Selective: true}, {Mode: "every", Every: 2}, op, {Mode: "full", Every: 1}},
		"selective": {op, {Mode: "full", Every: 1}},
		"every":     {{Mode: "full", Every: 1}},
		"op":        {{Mode: "full", Every: 1}},
		"modules":   {{Mode: "full", Every: 1}},
	}
	less := map[string][]core.Checkpoint{
		"full":      {{Mode: "none"}, {Mode: "selective", Selective: true}, {Mode: "every", Every: 2}, op},
		"every":     {{Mode: "none"}, {Mode: "selective", Selective: true}},
		"selective": {{Mode: "none"}},
		"op":        {{Mode: "none"}, {Mode: "selective", Selective: true}},
		"modules":   {{Mode: "none"}},
	}
	for _, c := range more[cur.Mode] {
		if c.Mode == "every" && n < 4 {
			continue // every other block of 2 or 3 is hardly a policy of its own
		}
		if c.Mode != "selective" && n == 0 {
			continue // no repeated blocks to checkpoint
		}
		if c.Mode == "op" && cur.Reentrant {
			continue // the per-op policy runs the non-reentrant checkpoint
		}
		add(c)
	}
	if ask.Goal == Speed {
		for _, c := range less[cur.Mode] {
			if c.Mode == "every" && n < 4 {
				continue
			}
			add(c)
		}
	}
	if n > 0 && cur.Mode != "budget" && p.Parallel.Norm().PP <= 1 {
		// The least recompute that fits, each block's policy solved (last:
		// on a tie the plain policy it solves to comes first).
		add(core.Checkpoint{Mode: "budget", Budget: core.Budget{Bytes: ask.Budget &^ (1<<20 - 1)}}) // whole MiB: a budget one can read
	}
	return out
}

// precisionChanges move fp32 to bf16 autocast (fp16 on cards without
// bf16) or pure bf16, and bf16 autocast to pure bf16.
func precisionChanges(p *core.Plan, ask Ask) []Change {
	half, mixed := "bf16", "bf16-mixed"
	if !p.Device.HasBF16() {
		half, mixed = "fp16", "fp16-mixed"
	}
	switch p.Precision.Name {
	case "fp32":
		return []Change{one("precision", "precision", mixed), one("precision", "precision", half)}
	case "bf16-mixed":
		return []Change{one("precision", "precision", "bf16")}
	}
	return nil
}

// adapterDTypeChanges keep PEFT's adapters over a bf16 or fp16 model in
// its dtype (lora(autocast_adapter_dtype=False)) where they would be fp32.
func adapterDTypeChanges(p *core.Plan, ask Ask) []Change {
	if p.AdapterDType() == units.InvalidDType {
		return nil
	}
	l := *p.LoRA
	l.BaseDType = true
	return []Change{one("adapter_dtype", "lora", l)}
}

// optimizerChanges change how Adam runs: fused (no foreach temporaries), 8-bit
// or paged 8-bit state (bitsandbytes), or the step in the backward; none
// under Megatron's precision, whose Adam is its FusedAdam (Plan.StepImpl).
func optimizerChanges(p *core.Plan, ask Ask) []Change {
	o := p.Optimizer
	if o.Kind != core.Adam && o.Kind != core.AdamW || p.Precision.Megatron {
		return nil
	}
	var out []Change
	if p.StepImpl() != "fused" {
		f := o
		f.Impl = "fused"
		out = append(out, one("optimizer", "optimizer", f))
	}
	out = append(out,
		one("optimizer", "optimizer", core.Optimizer{Kind: core.AdamW8bit, InBackward: o.InBackward}),
		one("optimizer", "optimizer", core.Optimizer{Kind: core.PagedAdamW8bit, InBackward: o.InBackward}))
	if !o.InBackward && p.GradAccum == 1 {
		b := o
		b.InBackward = true
		out = append(out, one("optimizer", "optimizer", b))
	}
	return out
}

// lossChunkChanges chunk the output layer and its loss (torchtune's
// num_output_chunks = 8).
func lossChunkChanges(p *core.Plan, ask Ask) []Change {
	if p.Model.Vocab <= 0 || p.LossChunks > 1 || p.FusedLoss != "" {
		return nil
	}
	return []Change{one("loss_chunks", "loss_chunks", int64(8))}
}

// shardingChanges shard model states over the data-parallel GPUs: a
// higher ZeRO stage, FSDP, or Megatron's distributed optimizer; with FSDP,
// resharding after the forward and sharding over every rank instead of
// HSDP's replicas. For speed, FSDP keeps its gathered parameters from the
// forward to the backward (reshard_after_forward=False).
func shardingChanges(p *core.Plan, ask Ask) []Change {
	par := p.Parallel.Norm()
	if par.ShardDegree()*max(par.DPReplicate, 1) < 2 {
		return nil
	}
	var out []Change
	with := func(f func(*core.Parallelism)) {
		q := p.Parallel
		f(&q)
		out = append(out, one("sharding", "parallel", q))
	}
	if ask.Goal == Speed && par.FSDP && !par.NoReshard {
		with(func(q *core.Parallelism) { q.NoReshard, q.ReshardTo = true, 0 })
	}
	if ask.Goal != Speed {
		out = append(out, bufferChanges(p)...)
	}
	switch {
	case par.FSDP:
		if par.NoReshard || par.ReshardTo > 0 {
			with(func(q *core.Parallelism) { q.NoReshard, q.ReshardTo = false, 0 })
		}
		if par.DPReplicate > 1 {
			with(func(q *core.Parallelism) { q.DPReplicate = 0 })
		}
	case par.DistributedOptimizer:
	case p.Precision.Megatron && par.Zero == 0:
		with(func(q *core.Parallelism) { q.DistributedOptimizer = true })
	default:
		for z := par.Zero + 1; z <= 3; z++ {
			with(func(q *core.Parallelism) {
				q.Zero = z
				q.OverlapComm = q.OverlapComm && z < 3 // ZeRO-3 overlaps always (parallel(overlap_comm=) is stages 1-2's)
			})
		}
		if par.Zero == 0 {
			with(func(q *core.Parallelism) { q.FSDP = true })
		}
	}
	return out
}

// bufferChanges hold fewer parameters or gradients unsharded at once:
// FSDP1 without prefetching (each unit gathered by its own hooks, as the
// Hugging Face Trainer runs it), ZeRO's buckets at the Hugging Face
// Trainer's "auto" sizes where DeepSpeed's defaults are larger (a 5e8
// element reduce bucket, 1 GB in bf16).
func bufferChanges(p *core.Plan) []Change {
	par := p.Parallel
	var out []Change
	if par.FSDP && par.FSDPVersion == 1 && (par.FSDP1Prefetch() != core.PrefetchNone || par.ForwardPrefetch) {
		q := par
		q.BackwardPrefetch, q.ForwardPrefetch = core.PrefetchNone, false
		out = append(out, one("sharding", "parallel", q))
	}
	if par.Zero > 0 {
		q, auto := *p, core.ZeroSize{Auto: true}
		q.Parallel.ReduceBucketSize = auto
		if par.Zero == 3 {
			q.Parallel.PrefetchBucketSize, q.Parallel.ParamPersistenceThreshold = auto, auto
		}
		if to, from := q.ZeroSizes(), p.ZeroSizes(); to.ReduceBucket > 0 && to.ReduceBucket < from.ReduceBucket {
			out = append(out, one("sharding", "parallel", q.Parallel))
		}
	}
	return out
}

// offloadChanges move optimizer state, parameters or saved activations to
// host memory; and take an offload back (offloadDrops) where that can
// help: for speed, or when the plan falls short of host memory.
func offloadChanges(p *core.Plan, ask Ask) []Change {
	out := offloadAdds(p, ask)
	if ask.Goal == Speed || ask.HostShort {
		out = append(out, offloadDrops(p)...)
	}
	return out
}

// offloadAdds move optimizer state, parameters or saved activations to
// host memory (and, short of host memory at ZeRO-3, from there to NVMe).
func offloadAdds(p *core.Plan, ask Ask) []Change {
	var cur core.Offload
	if p.Offload != nil {
		cur = *p.Offload
	}
	par := p.Parallel.Norm()
	var out []Change
	with := func(f func(*core.Offload)) {
		o := cur
		f(&o)
		out = append(out, one("offload", "offload", o))
	}
	if cur.Optimizer == "" && !par.FSDP {
		with(func(o *core.Offload) { o.Optimizer = "cpu" })
		if par.Zero == 0 && cur.Params == "" { // DeepSpeed offloads the optimizer through ZeRO only (core/offload.go)
			q := p.Parallel
			q.Zero = 2
			if par.PP > 1 {
				q.Zero = 1 // DeepSpeed's pipeline engine takes stage 1 only
			}
			c := &out[len(out)-1]
			c.Settings = append(c.Settings, Setting{"parallel", q})
		}
	}
	// DeepSpeed offloads parameters with ZeRO-3 only (offload_param,
	// core/offload.go), which takes no pipeline; FSDP offloads them
	// itself (FSDP2's CPUOffloadPolicy, FSDP1's CPUOffload).
	if cur.Params == "" && (par.FSDP || par.PP == 1) {
		with(func(o *core.Offload) {
			o.Params = "cpu"
			if !par.FSDP {
				// DeepSpeed's offload_param alone keeps the fp32 master and
				// the optimizer on the GPU (core/offload.go): the pair,
				// ZeRO-Infinity on the CPU, takes the most off the GPU.
				o.Optimizer = "cpu"
			}
		})
		if !par.FSDP && par.Zero != 3 {
			q := p.Parallel
			q.Zero = 3
			q.OverlapComm = false // ZeRO-3 overlaps always; overlap_comm= is stages 1-2's
			c := &out[len(out)-1]
			c.Settings = append(c.Settings, Setting{"parallel", q})
		}
	}
	if cur.Activations == "" {
		with(func(o *core.Offload) { o.Activations = "cpu" })
	}
	// Short of host memory at ZeRO-3 (DeepSpeed's NVMe tier takes stage 3
	// only, core/offload.go): the optimizer state, the parameters or both
	// from the host to the node's NVMe (ZeRO-Infinity), at the cluster's
	// NVMe rates (hw.NVMe, its default DeepSpeed's measured RAID-0).
	if ask.HostShort && par.Zero == 3 && !par.FSDP {
		opt, params := cur.Optimizer == "cpu", cur.Params == "cpu"
		if opt {
			with(func(o *core.Offload) { o.Optimizer = "nvme" })
		}
		if params {
			with(func(o *core.Offload) { o.Params = "nvme" })
		}
		if opt && params {
			with(func(o *core.Offload) { o.Optimizer, o.Params = "nvme", "nvme" })
		}
	}
	return out
}

// offloadDrops take a plan's offload back: each tier on the host or on
// NVMe back to the GPU, both tiers together, a tier on NVMe back to the
// host only (the smaller step: ZeRO-Infinity's swap buffers and NVMe
// reads go, the host holds the state), and offloaded activations back,
// alone and with the rest. The GPU then holds what the host held: a drop
// saves host memory (a plan short of host_memory) and step time (no PCIe
// copies, no CPU optimizer step), never device memory. FSDP moves
// parameters, gradients and optimizer state together (core/offload.go),
// so FSDP takes them back together. A drop of every tier writes
// offload=None (Setting.apply: no offload at all).
func offloadDrops(p *core.Plan) []Change {
	if p.Offload == nil {
		return nil
	}
	cur := *p.Offload
	var out []Change
	with := func(f func(*core.Offload)) {
		o := cur
		f(&o)
		if o.Activations == "" {
			o.SyncCopies = false // streams=False is for offloaded activations only
		}
		out = append(out, one("offload", "offload", o))
	}
	opt, params := cur.Optimizer != "", cur.Params != ""
	if p.Parallel.Norm().FSDP {
		if params || opt {
			with(func(o *core.Offload) { o.Optimizer, o.Params = "", "" })
		}
	} else {
		if opt {
			with(func(o *core.Offload) { o.Optimizer = "" })
		}
		if params {
			with(func(o *core.Offload) { o.Params = "" })
		}
		if opt && params {
			with(func(o *core.Offload) { o.Optimizer, o.Params = "", "" })
		}
		if cur.Optimizer == "nvme" {
			with(func(o *core.Offload) { o.Optimizer = "cpu" })
		}
		if cur.Params == "nvme" {
			with(func(o *core.Offload) { o.Params = "cpu" })
		}
		if cur.Optimizer == "nvme" && cur.Params == "nvme" {
			with(func(o *core.Offload) { o.Optimizer, o.Params = "cpu", "cpu" })
		}
	}
	if cur.Activations != "" {
		with(func(o *core.Offload) { o.Activations = "" })
		if params || opt {
			with(func(o *core.Offload) { *o = core.Offload{} })
		}
	}
	return out
}

// expandableChanges turn on expandable segments: no free tails left in
// segments of fixed size.
func expandableChanges(p *core.Plan, ask Ask) []Change {
	if p.ExpandableSegments {
		return nil
	}
	return []Change{one("expandable_segments", "expandable_segments", true)}
}

// vllmSleepChanges put a GRPO step's colocated vLLM engine to sleep
// between generations (core/grpo.go): TRL's vllm_enable_sleep_mode.
func vllmSleepChanges(p *core.Plan, ask Ask) []Change {
	pr := p.Preference
	if !pr.GRPO() || pr.GRPOConfig.VLLM != core.VLLMColocate || pr.GRPOConfig.Sleep {
		return nil
	}
	asleep := *pr
	asleep.GRPOConfig.Sleep = true
	return []Change{one("vllm_sleep", "preference", asleep)}
}

// memberChanges run an ensemble's stacked members one at a time.
func memberChanges(p *core.Plan, ask Ask) []Change {
	if p.Members < 2 || p.MembersMode == "sequential" {
		return nil
	}
	return []Change{one("members_mode", "members_mode", "sequential")}
}

// layoutChanges spread the same GPUs differently: tensor parallelism 2, 4
// or 8 (with sequence parallelism), or 2 or 4 pipeline stages, taken from
// the data-parallel degree; the fewer replicas accumulate more
// micro-batches, so the global batch, and the step, stay the same.
func layoutChanges(p *core.Plan, ask Ask) []Change {
	par := p.Parallel.Norm()
	gpus := par.GPUs()
	if gpus < 2 || p.Parallel.MicroBatches > 0 {
		return nil
	}
	var out []Change
	try := func(tp, pp int64) {
		rest := tp * pp * par.CP
		if (tp == par.TP && pp == par.PP) || gpus%rest != 0 {
			return
		}
		dp := gpus / rest
		if (p.GradAccum*par.DP)%dp != 0 {
			return // the global batch does not split over dp replicas
		}
		q := p.Parallel
		q.TP, q.PP, q.DP = tp, pp, dp
		q.SequenceParallel = tp > 1
		c := one("layout", "parallel", q)
		if ga := p.GradAccum * par.DP / dp; ga != p.GradAccum {
			c.Settings = append(c.Settings, Setting{"grad_accum", ga})
		}
		out = append(out, c)
	}
	for _, tp := range []int64{2, 4, 8} {
		try(tp, par.PP)
	}
	for _, pp := range []int64{2, 4} {
		try(par.TP, pp)
	}
	return out
}

// schedules are the pipeline schedules advice tries, with the model chunks
// per GPU each runs (pipeline_schedule.go): 1F1B and ZB-H1 hold 1F1B's
// activations, ZB-V and the interleaved schedule two chunks, DualPipe the
// parameters twice.
var schedules = []struct {
	name    string
	virtual int64
}{{"1f1b", 0}, {"zb-h1", 0}, {"zb-v", 2}, {"interleaved", 2}, {"dualpipe", 0}}

// scheduleChanges try a pipelined plan's other schedules: less in flight
// saves memory, a smaller bubble time.
func scheduleChanges(p *core.Plan, ask Ask) []Change {
	par := p.Parallel.Norm()
	if par.PP < 2 {
		return nil
	}
	var out []Change
	for _, s := range schedules {
		if s.name == par.Schedule {
			continue
		}
		q := p.Parallel
		q.Schedule, q.VirtualStages = s.name, s.virtual
		out = append(out, one("schedule", "parallel", q))
	}
	return out
}

// cpModeChanges switch context parallelism between ring attention and
// Ulysses' all-to-all (their buffers and exchanges differ).
func cpModeChanges(p *core.Plan, ask Ask) []Change {
	par := p.Parallel.Norm()
	if par.CP < 2 {
		return nil
	}
	q := p.Parallel
	if par.CPMode == "ulysses" {
		q.CPMode = ""
	} else {
		q.CPMode = "ulysses"
	}
	return []Change{one("cp_mode", "parallel", q)}
}

// expertTPChanges keep a MoE's experts whole on each tensor-parallel rank
// (expert_tp=1, with sequence parallelism), or split them with tp again.
func expertTPChanges(p *core.Plan, ask Ask) []Change {
	par := p.Parallel.Norm()
	moe := false
	for _, l := range p.Model.Layers {
		core.Walk(l, "", func(_ string, x core.Layer) {
			if _, ok := x.(core.ExpertLayer); ok {
				moe = true
			}
		})
	}
	if !moe || par.TP < 2 {
		return nil
	}
	q := p.Parallel
	if par.ETP == 1 {
		q.ETP = 0
	} else {
		q.ETP, q.SequenceParallel = 1, true
	}
	return []Change{one("expert_tp", "parallel", q)}
}

// compileChanges compile each block and the loss (train(compile=True)):
// AOTAutograd's partitioner recomputes cheap pointwise ops instead of
// saving them, and Inductor's fused kernels hold no intermediates.
func compileChanges(p *core.Plan, ask Ask) []Change {
	if (p.Compile.Blocks && p.Compile.Loss) || blocks(p.Model) == 0 {
		return nil // compiled already, or no repeated blocks to compile
	}
	return []Change{one("compile", "compile", core.Compile{Blocks: true, Loss: true})}
}
