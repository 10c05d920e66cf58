package tables

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/search"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// search(model, gpus=..., ...): the fastest fitting layouts of a model on
// a cluster (sim.Search), as a table.

func SearchBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "search",
		Sig: "search(model, gpus=None, gpu=\"H100-80GB\", seq=None, global_batch=None, precision=\"bf16-mixed\", " +
			"optimizer=adamw(), nodes=None, gpus_per_node=None, top=10, tp=None, pp=None, cp=None, ep=None, expert_tp=None, " +
			"sharding=None, cp_mode=None, micro_batch=None, checkpoint=None, virtual_stages=None, offload=None, max_layouts=2000000)",
		Doc: "Finds the fastest layouts of model that fit, and the Pareto front of step time and memory: " +
			"search(m, gpus=1024, seq=8192, global_batch=1024). By default it explores the whole layout space of gpus " +
			"GPUs (or nodes x gpus_per_node) for global_batch sequences of seq tokens per step: every factorisation into " +
			"dp x tp x pp x cp x ep (tp up to the attention heads, pp up to the repeated blocks, cp where it divides the " +
			"sequence, ep over the divisors of a MoE's experts, and for a MoE at tp > 1 both expert_tp=tp, its experts split like the " +
			"dense layers, and expert_tp=1, whole experts on every tensor-parallel rank), both context-parallel attentions (ring, Ulysses; cp_mode=[\"ring\", \"ulysses\", \"allgather\"] adds torch's " +
			"context_parallel() as torchtitan runs it, never faster than the ring and allocating more), every " +
			"micro-batch dividing a replica's sequences, every count of model chunks per GPU (virtual_stages) that splits the " +
			"blocks evenly or with Megatron's embedding and loss slots (account_for_embedding/loss), torchtitan's uneven split " +
			"for a pipeline degree that splits them neither way, every checkpoint policy (none, selective, op, full) and " +
			"sharding (ddp, zero1, zero2, zero3, fsdp, and hsdp with every split of the dp x cp ranks into replicas x shards; " +
			"megatron and distopt with precision=\"megatron\"). offload=[\"none\", \"optimizer\"] adds ZeRO-Offload " +
			"(offload(optimizer=\"cpu\"), DeepSpeed's offload_optimizer) to the zero1, zero2 and zero3 layouts, and \"params\" " +
			"offload(params=\"cpu\") to the zero3 layouts (DeepSpeed's offload_param) and the fsdp ones (FSDP2's CPUOffloadPolicy, or FSDP1's " +
			"CPUOffload when the plan carries fsdp_version=1: shards, gradients and optimizer state on the host), and \"nvme\" ZeRO-Infinity, " +
			"offload(optimizer=\"nvme\", params=\"cpu\"), to the zero3 layouts (DeepSpeed's offload_optimizer on NVMe, at the cluster's nvme_read= and nvme_write= rates; " +
			"the parameters stay on the host: on NVMe they would keep max_in_cpu elements pinned there anyway and add the swapper's buffers). " +
			"Each layout is checked against the plan's train(host_memory=) as its replay checks it: one short of host memory does not fit (t.notes count them). " +
			"A params-offloaded or NVMe layout is timed by its replay (the profiles do " +
			"not sum its per-gather PCIe copies), so asking for it costs a replay per layout the memory bound keeps; the default is " +
			"[\"none\"]: an offloaded layout is never faster (its PCIe copies and the CPU's Adam step replace the GPU's step), " +
			"so it is asked for when memory is the question (it joins the front). " +
			"search(plan, ...) searches the layouts of a plan (train(...)): gpus= defaults to the plan's GPUs, global_batch= to its " +
			"batch x micro-batches x dp, gpus_per_node= to its cluster's (else 8), and seq, gpu, precision and optimizer are the plan's " +
			"(passing them is an error: plan.replace(...) first). The axes (degrees, sharding, micro-batch and grad_accum, schedule, " +
			"virtual_stages and the split, cp_mode, checkpoint, offload) replace the plan's own, and t.notes name those of the plan " +
			"they replaced; every other setting is carried into every layout: parallel()'s Megatron flags (router_dtype, " +
			"unpermute_probs, shared_expert_overlap, tp_comm_overlap, loss_dp_group, overlap_grad_reduce, tp_runtime, ...), its FSDP " +
			"options (on the fsdp and hsdp layouts), compile, lora, quant (QLoRA), freeze, loss_chunks, fused_loss, liger_kernels, float8, the overheads and the cluster's links and host; layouts " +
			"a carried setting makes invalid count among the rejected, and so do layouts whose lowering refuses them (torchao's float8 at a tp that " +
			"leaves a linear's shard on a rank off torch._scaled_mm's multiple of 16), by reason; a model that does not lower is an error. A plan with its activations on the host (offload(activations=\"cpu\")) " +
			"keeps them there in every layout, each timed by its replay as it comes up (t.notes count them), with offload=[\"none\"] only. A plan whose schedule is not 1f1b or interleaved, or that " +
			"offloads its optimizer or parameters (an axis: offload=), is refused with a hint, as are settings whose memory the " +
			"search cannot bound (fp8_param_gather, tokens_per_batch, members, " +
			"first_step, validation, rollout, images, fsdp_units, preference, trainable) and muon(), whose step the profiles do not price (its Newton-Schulz products: sweep() evaluates it). Every layout is checked by the plan and bounded from block " +
			"profiles: a lower bound of its device memory. Layouts whose bound exceeds the GPU cannot fit and are pruned; the " +
			"rest are estimated from the profiles (the step time equals a full replay's) and walked fastest first, replaying in full the fastest until top of them " +
			"fit (top=None: all) and every layout whose bound is below the memory of every faster layout that fits (a pipelined " +
			"one until one of its stages, replayed the fullest by the bound first, needs as much), which " +
			"finds the exact Pareto front (front=True) with full replays only. Lists narrow the space, each value listed once: tp=[4, 8], pp=, cp=, " +
			"ep= (a MoE's: each value a divisor of its experts), expert_tp=[1] (a MoE's; each value 1 or a tp of the space), micro_batch=, checkpoint=[\"none\", \"full\"], virtual_stages= (1 is the 1F1B schedule), sharding=, " +
			"cp_mode=[\"ring\"], offload=; a list may be a range (tp=range(1, 9)), names each value once, and is read by some layout (virtual_stages past 1 with a pp above 1, " +
			"cp_mode with a cp above 1). Returns a table, fastest first, of the top rows and the front: " +
			"tp, pp, cp, cp_mode, ep, expert_tp (a MoE's only), dp, dp_replicate, sharding, offload (with offload=), micro_batch, micro_batches, schedule, virtual_stages, " +
			"stage_split (even, slots, torchtitan), checkpoint, step_time, mfu, tokens_per_s, device_used (the fullest GPU), " +
			"headroom, front, plan (simulate(row[\"plan\"]) or replace() it) and report; t.notes say what was explored: the " +
			"layouts, those the plan rejected (by reason), pruned by each bound, dominated (by the bound or by a stage's replay), replayed, " +
			"and the combinations of degrees that make no layout, by cause (dp not dividing global_batch, no micro_batch or virtual_stages " +
			"of the lists that fits; tp x cp x pp not dividing the GPUs only when no layout is left): a space with no layout says why; " +
			"emit(t) (memsh plot) " +
			"and t.plot(\"front.svg\") draw step_time against device_used with the front ringed (`memsh doc tabulate` lists " +
			"the table's methods). Runs on every core with a progress bar on a terminal; Ctrl-C, --timeout and --max-memory " +
			"stop it. A space larger than max_layouts is refused with a hint. gpus is at most 16,777,216 (2^24), as for any layout.",
		Fn: searchFn,
	}}
}

func searchFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("search takes a model or a plan, then keywords (got %d positional arguments)", len(args))
	}
	var model, gpus, seq, globalBatch, nodes, top starlark.Value = nil, starlark.None, nil, starlark.None, starlark.None, starlark.MakeInt(10)
	var gpu, precision, optimizer, gpn starlark.Value // nil: not given
	var tp, pp, cp, ep, etp, sharding, cpMode, mbs, ckpt, virtual, offload starlark.Value
	maxLayouts := int64(search.DefaultMaxLayouts)
	if err := plans.AliasedKeyword(b.Name(), kwargs, searchAlias); err != nil {
		return nil, err
	}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "model", &model, "gpus?", &gpus, "gpu?", &gpu,
		"seq?", &seq, "global_batch?", &globalBatch, "precision?", &precision, "optimizer?", &optimizer,
		"nodes?", &nodes, "gpus_per_node?", &gpn, "top?", &top, "tp?", &tp, "pp?", &pp, "cp?", &cp, "ep?", &ep,
		"expert_tp?", &etp, "sharding?", &sharding, "cp_mode?", &cpMode, "micro_batch?", &mbs, "checkpoint?", &ckpt, "virtual_stages?", &virtual,
		"offload?", &offload, "max_layouts?", &maxLayouts); err != nil {
		return nil, err
	}
	if maxLayouts < 1 {
		return nil, fmt.Errorf("max_layouts must be at least 1 (got %d)", maxLayouts)
	}
	if gpn == starlark.None { // as not given
		gpn = nil
	}
	// The base plan: the plan given, or one built from the model and the
	// job's keywords.
	decl := host.CallerPos(thread)
	var base *plans.Plan
	fromPlan := false
	switch x := model.(type) {
	case *plans.Plan:
		fromPlan = true
		for _, k := range []struct {
			name string
			v    starlark.Value
		}{{"seq", seq}, {"gpu", gpu}, {"precision", precision}, {"optimizer", optimizer}} {
			if k.v != nil {
				return nil, host.WithHint(fmt.Errorf("search(plan, %s=...): the plan sets its own %s", k.name, k.name),
					fmt.Sprintf("search(plan.replace(%s=...), ...) searches the plan with another %s", k.name, k.name))
			}
		}
		base = x
	case *models.Model:
		if seq == nil {
			seq = starlark.None
		}
		if gpu == nil {
			gpu = starlark.String("H100-80GB")
		}
		if precision == nil {
			precision = starlark.String("bf16-mixed")
		}
		a := plans.DefaultTrainArgs()
		a.Set("model", model)
		a.Set("seq", seq)
		a.Set("gpu", gpu)
		a.Set("precision", precision)
		if optimizer != nil {
			a.Set("optimizer", optimizer)
		}
		bv, err := plans.NewPlan(a, decl)
		if err != nil {
			return nil, err
		}
		base = bv.(*plans.Plan)
		if gpn == nil {
			gpn = starlark.MakeInt(8)
		}
	default:
		return nil, host.WithHint(fmt.Errorf("search takes a model or a plan as its first argument (got %s)", model.Type()),
			"search(llama(\"8b\"), gpus=64, seq=8192, global_batch=512), or search(train(...), gpus=64) to search the layouts of a plan")
	}
	bp := base.SimPlan()

	sp := search.Space{MaxLayouts: int(min(maxLayouts, 1<<30)), Workers: runtime.GOMAXPROCS(0)}
	var err error
	if gpn != nil { // else the plan's cluster (search.Space's 0)
		if sp.GPUsPerNode, err = host.AsInt64(gpn, "gpus_per_node"); err != nil {
			return nil, err
		}
		if sp.GPUsPerNode < 1 {
			return nil, fmt.Errorf("gpus_per_node must be at least 1 (got %d)", sp.GPUsPerNode)
		}
	}
	perNode := sp.GPUsPerNode // the node size nodes= counts in
	if perNode == 0 {
		perNode = int64(hw.DefaultGPUsPerNode)
		if bp.Cluster.GPUsPerNode > 0 {
			perNode = bp.Cluster.GPUsPerNode
		}
	}
	planGPUs := gpus == starlark.None && nodes == starlark.None && fromPlan
	switch {
	case planGPUs: // the plan's own
		sp.GPUs = bp.Parallel.GPUs()
	case gpus == starlark.None && nodes == starlark.None:
		return nil, fmt.Errorf("search needs gpus= (or nodes=): the GPUs of the job")
	case nodes != starlark.None:
		n, err := host.AsInt64(nodes, "nodes")
		if err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, fmt.Errorf("nodes must be at least 1 (got %d)", n)
		}
		total, ok := units.CheckedProduct(n, perNode)
		if !ok {
			return nil, fmt.Errorf("search: nodes=%d x gpus_per_node=%d is more GPUs than memsh can count", n, perNode)
		}
		sp.GPUs = total
		if gpus != starlark.None {
			g, err := host.AsInt64(gpus, "gpus")
			if err != nil {
				return nil, err
			}
			if g != sp.GPUs {
				return nil, fmt.Errorf("gpus=%d but nodes=%d x gpus_per_node=%d is %d", g, n, perNode, sp.GPUs)
			}
		}
	default:
		if sp.GPUs, err = host.AsInt64(gpus, "gpus"); err != nil {
			return nil, err
		}
	}
	if globalBatch == starlark.None && fromPlan { // the plan's own: micro-batch x micro-batches x replicas
		par := bp.Parallel.Norm()
		globalBatch = starlark.MakeInt64(bp.Batch * bp.MicroBatches() * par.DP)
	}
	if globalBatch == starlark.None {
		return nil, host.WithHint(fmt.Errorf("search needs global_batch=: sequences per step over all data-parallel replicas"), "e.g. global_batch=1024 with seq=8192 is 8M tokens per step")
	}
	if sp.GlobalBatch, err = host.AsInt64(globalBatch, "global_batch"); err != nil {
		return nil, err
	}
	if top == starlark.None {
		sp.Top = 0
	} else {
		n, err := host.AsInt64(top, "top")
		if err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, fmt.Errorf("top must be at least 1, or None for every fitting layout (got %d)", n)
		}
		sp.Top = int(n)
	}
	for _, l := range []struct {
		v    starlark.Value
		what string
		dst  *[]int64
	}{{tp, "tp", &sp.TP}, {pp, "pp", &sp.PP}, {cp, "cp", &sp.CP}, {ep, "ep", &sp.EP}, {etp, "expert_tp", &sp.ExpertTP}, {mbs, "micro_batch", &sp.MicroBatch}, {virtual, "virtual_stages", &sp.Virtual}} {
		if *l.dst, err = intList(l.v, l.what); err != nil {
			return nil, err
		}
	}
	if sp.Sharding, err = searchStrings(sharding, "sharding"); err != nil {
		return nil, err
	}
	if sp.Checkpoint, err = searchStrings(ckpt, "checkpoint"); err != nil {
		return nil, err
	}
	if sp.CPModes, err = searchStrings(cpMode, "cp_mode"); err != nil {
		return nil, err
	}
	if sp.Offload, err = searchStrings(offload, "offload"); err != nil {
		return nil, err
	}

	st := host.StateOf(thread)
	ctx := st.Context
	if ctx == nil {
		ctx = context.Background()
	}
	bar := host.NewProgress(st.Progress, "search", 0)
	sp.Progress = func(done, total int) {
		bar.SetTotal(total)
		bar.Set(done)
	}
	res, err := search.Run(ctx, base.SimPlan(), sp)
	bar.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, host.StopError(ctx, "search", "")
		}
		return nil, host.WithOrigin(err, base.Decl())
	}

	columns := []string{"tp", "pp", "cp", "cp_mode", "ep", "dp", "dp_replicate", "sharding", "micro_batch", "micro_batches", "schedule",
		"virtual_stages", "stage_split", "checkpoint", "step_time", "mfu", "tokens_per_s", "device_used", "headroom", "front", "plan", "report"}
	moe := search.HasExperts(base.SimPlan().Model) // the experts' tensor-parallel degree is a column of a MoE's search only
	if moe {
		columns = append(columns[:5], append([]string{"expert_tp"}, columns[5:]...)...)
	}
	offloads := false // an offload column when the space has offloaded layouts
	for _, o := range sp.Offload {
		offloads = offloads || o != "none"
	}
	if offloads {
		at := slices.Index(columns, "sharding") + 1
		columns = append(columns[:at], append([]string{"offload"}, columns[at:]...)...)
	}
	units := make([]string, len(columns))
	for j, c := range columns {
		units[j] = reports.ColumnUnit(c)
	}
	rows := make([][]starlark.Value, 0, len(res.Rows)+len(res.Front))
	for _, row := range searchRows(res) {
		p := row.Plan
		par := p.Parallel
		ra := base.Args.Clone()
		ra.Set("batch", starlark.MakeInt64(p.Batch))
		ra.Set("grad_accum", starlark.MakeInt64(p.GradAccum))
		ra.Set("checkpoint", starlark.String(p.Checkpoint.Mode))
		ra.Set("parallel", plans.Parallel{P: par})
		ra.Set("cluster", plans.Cluster{C: p.Cluster})
		offloaded := "none"
		if p.Offload != nil {
			ov, err := plans.EngineValue(*p.Offload)
			if err != nil {
				return nil, fmt.Errorf("internal error: search row %s: %v", par, err)
			}
			ra.Set("offload", ov)
			offloaded = "optimizer"
			switch {
			case p.Offload.Optimizer == "nvme":
				offloaded = "nvme"
			case p.Offload.Params != "":
				offloaded = "params"
			}
		}
		pv, err := plans.NewPlan(ra, decl)
		if err != nil {
			return nil, fmt.Errorf("internal error: search row %s: %v", par, err)
		}
		plan := pv.(*plans.Plan)
		rep := reports.NewReport(row.Report, plan, st.Color)
		r := row.Report
		schedule := "1f1b"
		vs := max(par.VirtualStages, 1)
		if par.Schedule != "" {
			schedule = par.Schedule
		}
		one := func(n int64) starlark.Value { return starlark.MakeInt64(max(n, 1)) }
		cpMode := "ring"
		if par.CPMode != "" {
			cpMode = par.CPMode
		}
		split := "even"
		switch {
		case par.EmbeddingSlot:
			split = "slots"
		case par.StageSplit != "":
			split = par.StageSplit
		}
		degrees := []starlark.Value{one(par.TP), one(par.PP), one(par.CP), starlark.String(cpMode), one(par.EP)}
		if moe {
			degrees = append(degrees, starlark.MakeInt64(par.ETPn()))
		}
		degrees = append(degrees, one(par.DP), one(par.DPReplicate), starlark.String(row.Sharding))
		if offloads {
			degrees = append(degrees, starlark.String(offloaded))
		}
		rows = append(rows, append(degrees,
			starlark.MakeInt64(p.Batch), starlark.MakeInt64(p.GradAccum), starlark.String(schedule),
			starlark.MakeInt64(vs), starlark.String(split), starlark.String(p.Checkpoint.Mode),
			rep.TimeFigure(r.Time.StepSeconds), rep.TimeFigure(r.Time.MFU), rep.TimeFigure(r.Time.TokensPerS),
			starlark.MakeInt64(search.DeviceMemory(r)), starlark.MakeInt64(r.Headroom), starlark.Bool(row.Front), plan, rep,
		))
	}
	m := base.SimPlan().Model
	title := fmt.Sprintf("search: %s on %d x %s, %s of %s per step", m.Name, sp.GPUs, base.SimPlan().Device.Name,
		host.Count(sp.GlobalBatch, "sequence", "sequences"), host.Count(base.SimPlan().Seq, "token", "tokens"))
	if m.Points > 0 {
		title = fmt.Sprintf("search: %s on %d x %s, %d samples of %d points per step", m.Name, sp.GPUs, base.SimPlan().Device.Name, sp.GlobalBatch, m.Points)
	}
	notes := searchNotes(res)
	if replaced := search.ReplacedLayout(bp); fromPlan && len(replaced) > 0 {
		notes = append(notes, fmt.Sprintf("the plan's %s: axes of the search, set by each row; its other settings are in every row", strings.Join(replaced, ", ")))
	}
	t := NewResultTable(title, columns, units, rows, notes)
	t.color = st.Color
	t.chart = &host.ChartSpec{X: "device_used", Y: "step_time", Pareto: true}
	return t, nil
}

// searchRows is the table's rows: the fastest that fit and the Pareto
// front, each once, fastest first.
func searchRows(res *search.Result) []search.Row {
	out := append([]search.Row(nil), res.Rows...)
	for _, f := range res.Front {
		seen := false
		for _, r := range res.Rows {
			seen = seen || r.Report == f.Report
		}
		if !seen {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Report.Time.StepSeconds < out[j].Report.Time.StepSeconds })
	return out
}

// searchNotes says what the search explored: the layouts, those the plan
// rejected and why, those the bounds pruned, those not replayed because
// a faster layout that fits needs less memory, the replays and the front.
func searchNotes(res *search.Result) []string {
	s := res.Stats
	notes := []string{
		fmt.Sprintf("explored %d layouts: %d rejected by the plan, %d pruned by model states and %d by held activations "+
			"(lower bounds above the GPU), %d dominated (slower than a layout that fits and, by the bound, needing "+
			"at least its memory), %d dominated by a pipeline stage's replay, %d replayed in full, %d of them fit",
			s.Layouts+s.Invalid, s.Invalid, s.PrunedStates, s.PrunedMemory, s.Dominated, s.StageDominated, s.Replayed, s.Fit),
	}
	if s.TimedByReplay > 0 {
		notes = append(notes, fmt.Sprintf("  %d layouts with their parameters or activations on the host or their optimizer on NVMe were timed by a full replay (the block profiles do not sum their copies)", s.TimedByReplay))
	}
	if s.HostShort > 0 {
		notes = append(notes, fmt.Sprintf("  %d replayed layouts need more host memory per node than host_memory (train(host_memory=)'s check): they do not fit", s.HostShort))
	}
	for i, r := range s.InvalidBy {
		if i == 3 {
			notes = append(notes, "  and "+host.Count(int64(len(s.InvalidBy)-3), "more reason", "more reasons"))
			break
		}
		notes = append(notes, fmt.Sprintf("  rejected %d: %s", r.Count, r.Why))
	}
	empty := s.Layouts+s.Invalid == 0
	for _, r := range s.Skipped {
		// tp x cp x pp over the GPUs is the cross product of the lists at
		// work: worth saying only when nothing else is left.
		if empty || !strings.HasPrefix(r.Why, "tp x cp x pp") {
			notes = append(notes, fmt.Sprintf("  skipped %s of degrees: %s", host.Count(int64(r.Count), "combination", "combinations"), r.Why))
		}
	}
	if len(res.Front) > 0 {
		notes = append(notes, fmt.Sprintf("the Pareto front of step time and device memory: %d layouts (front=True; emit(t) or t.plot(\"front.svg\") draws it)", len(res.Front)))
	}
	switch {
	case len(res.Rows) == 0 && s.HostShort > 0:
		// The node's host memory, not the GPU's, turned some away:
		// ZeRO-Infinity moves the optimizer state from the host to NVMe.
		notes = append(notes, "no layout fits: some fail host_memory; offload=[..., \"nvme\"] (ZeRO-Infinity: the optimizer state on NVMe, zero3), "+
			"more nodes, more GPUs, a smaller micro-batch or global batch, or checkpoint=\"full\" may help")
	case empty:
		notes = append(notes, "no layout in the space (the combinations above): widen tp=, pp=, cp= or micro_batch= (None tries every one), "+
			"or give a global_batch that a data-parallel degree divides")
	case len(res.Rows) == 0:
		notes = append(notes, "no layout fits: more GPUs, a smaller micro-batch or global batch, or checkpoint=\"full\" may help")
	}
	return notes
}

// intList reads None (nil result: the default) or a list of ints.
func intList(v starlark.Value, what string) ([]int64, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	var out []int64
	for _, x := range listOf(v) {
		n, err := host.AsInt64(x, what)
		if err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, fmt.Errorf("%s values must be at least 1 (got %d)", what, n)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s must list at least one value", what)
	}
	return out, nil
}

// searchStrings reads None or a list of strings.
func searchStrings(v starlark.Value, what string) ([]string, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	var out []string
	for _, x := range listOf(v) {
		s, ok := x.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s must be a list of strings (got %s)", what, x.Type())
		}
		out = append(out, string(s))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s must list at least one value", what)
	}
	return out, nil
}

// searchAlias is the hint for a name search() does not take that a plan
// or a trainer spells (plans.AliasedKeyword).
func searchAlias(name, value string) string {
	switch name {
	case "batch", "batch_size", "micro_batch_size", "mbs", "per_device_train_batch_size":
		return fmt.Sprintf("search tries micro-batch sizes: micro_batch=%s (a list; None tries every size that divides the sequences a data-parallel rank gets)", value)
	case "global_batch_size", "gbs", "train_batch_size":
		return fmt.Sprintf("search calls the sequences per step global_batch: global_batch=%s", value)
	case "num_gpus", "world_size", "n_gpus", "ngpus":
		return fmt.Sprintf("search calls the GPU count gpus: gpus=%s", value)
	case "zero", "fsdp", "zero_stage":
		return `search tries data-parallel sharding from a list: sharding=["zero3", "fsdp"] (ddp, zero1, zero2, zero3, fsdp, hsdp; megatron and distopt under precision="megatron")`
	case "dp":
		return "search makes dp what tp x pp x cp leave of gpus: restrict tp=, pp= and cp= instead"
	case "seq_len", "max_seq_length", "seq_length", "max_length":
		return fmt.Sprintf("search calls the tokens per sequence seq: seq=%s", value)
	}
	return ""
}
