package tables

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
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
			"optimizer=adamw(), nodes=None, gpus_per_node=8, top=10, tp=None, pp=None, cp=None, ep=None, " +
			"sharding=None, cp_mode=None, micro_batch=None, checkpoint=None, virtual_stages=None, max_layouts=200000)",
		Doc: "Finds the fastest layouts of model that fit: search(m, gpus=1024, seq=8192, global_batch=1024). " +
			"It enumerates every valid layout (dp x tp x pp x cp x ep, sharding, micro-batch, pipeline " +
			"schedule, checkpointing) of gpus GPUs (or nodes x gpus_per_node) for global_batch sequences of seq " +
			"tokens per step, prunes those whose model states and held activations cannot fit, ranks the rest " +
			"by step time (from block profiles, equal to a full replay's) and replays the fastest in full until " +
			"top of them fit (top=None: all). Lists narrow the space: tp=[4, 8], pp=, cp=, ep=, " +
			"micro_batch=, checkpoint=[\"none\", \"full\"], virtual_stages= (1 is the 1F1B schedule), " +
			"sharding= of \"ddp\", \"zero1\", \"zero2\", \"zero3\", \"fsdp\", \"hsdp\" (FSDP sharded inside a node, replicated " +
			"across nodes; layouts whose dp x cp group fits a node have no HSDP) (default: ddp and the ZeRO stages) or " +
			"\"megatron\", \"distopt\" (the default with precision=\"megatron\"); cp_mode=[\"ring\", \"ulysses\"] tries both " +
			"context-parallel attentions (default ring). A pipeline whose chunks do not divide the blocks but do once the embedding " +
			"and the loss count as a block each takes Megatron's account_for_embedding and account_for_loss. Returns a table, fastest first: " +
			"tp, pp, cp, cp_mode, ep, dp, sharding, micro_batch, micro_batches, schedule, virtual_stages, checkpoint, " +
			"step_time, mfu, tokens_per_s, device_used, headroom, plan (simulate(row[\"plan\"]) or replace() it) " +
			"and report; t.notes say what was pruned (`memsh doc tabulate` lists the table's methods). Runs on every core with a progress bar on a terminal; " +
			"Ctrl-C, --timeout and --max-memory stop it. gpus is at most 16,777,216 (2^24), as for any layout.",
		Fn: searchFn,
	}}
}

func searchFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("search takes the model, then keywords (got %d positional arguments)", len(args))
	}
	var model, gpus, seq, globalBatch, nodes, top starlark.Value = nil, starlark.None, starlark.None, starlark.None, starlark.None, starlark.MakeInt(10)
	var gpu, precision, optimizer starlark.Value = starlark.String("H100-80GB"), starlark.String("bf16-mixed"), nil
	var gpn starlark.Value = starlark.MakeInt(8)
	var tp, pp, cp, ep, sharding, cpMode, mbs, ckpt, virtual starlark.Value
	maxLayouts := int64(search.DefaultMaxLayouts)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "model", &model, "gpus?", &gpus, "gpu?", &gpu,
		"seq?", &seq, "global_batch?", &globalBatch, "precision?", &precision, "optimizer?", &optimizer,
		"nodes?", &nodes, "gpus_per_node?", &gpn, "top?", &top, "tp?", &tp, "pp?", &pp, "cp?", &cp, "ep?", &ep,
		"sharding?", &sharding, "cp_mode?", &cpMode, "micro_batch?", &mbs, "checkpoint?", &ckpt, "virtual_stages?", &virtual,
		"max_layouts?", &maxLayouts); err != nil {
		return nil, err
	}
	if maxLayouts < 1 {
		return nil, fmt.Errorf("max_layouts must be at least 1 (got %d)", maxLayouts)
	}
	sp := search.Space{MaxLayouts: int(min(maxLayouts, 1<<30)), Workers: runtime.GOMAXPROCS(0)}
	var err error
	if sp.GPUsPerNode, err = host.AsInt64(gpn, "gpus_per_node"); err != nil {
		return nil, err
	}
	if sp.GPUsPerNode < 1 {
		return nil, fmt.Errorf("gpus_per_node must be at least 1 (got %d)", sp.GPUsPerNode)
	}
	switch {
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
		total, ok := units.CheckedProduct(n, sp.GPUsPerNode)
		if !ok {
			return nil, fmt.Errorf("search: nodes=%d x gpus_per_node=%d is more GPUs than memsh can count", n, sp.GPUsPerNode)
		}
		sp.GPUs = total
		if gpus != starlark.None {
			g, err := host.AsInt64(gpus, "gpus")
			if err != nil {
				return nil, err
			}
			if g != sp.GPUs {
				return nil, fmt.Errorf("gpus=%d but nodes=%d x gpus_per_node=%d is %d", g, n, sp.GPUsPerNode, sp.GPUs)
			}
		}
	default:
		if sp.GPUs, err = host.AsInt64(gpus, "gpus"); err != nil {
			return nil, err
		}
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
	}{{tp, "tp", &sp.TP}, {pp, "pp", &sp.PP}, {cp, "cp", &sp.CP}, {ep, "ep", &sp.EP}, {mbs, "micro_batch", &sp.MicroBatch}, {virtual, "virtual_stages", &sp.Virtual}} {
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

	a := plans.DefaultTrainArgs()
	a.Set("model", model)
	a.Set("seq", seq)
	a.Set("gpu", gpu)
	a.Set("precision", precision)
	if optimizer != nil {
		a.Set("optimizer", optimizer)
	}
	decl := host.CallerPos(thread)
	bv, err := plans.NewPlan(a, decl)
	if err != nil {
		return nil, err
	}
	base := bv.(*plans.Plan)

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

	columns := []string{"tp", "pp", "cp", "cp_mode", "ep", "dp", "sharding", "micro_batch", "micro_batches", "schedule",
		"virtual_stages", "checkpoint", "step_time", "mfu", "tokens_per_s", "device_used", "headroom", "plan", "report"}
	units := make([]string, len(columns))
	for j, c := range columns {
		units[j] = reports.ColumnUnit(c)
	}
	rows := make([][]starlark.Value, 0, len(res.Rows))
	for _, row := range res.Rows {
		p := row.Plan
		par := p.Parallel
		ra := base.Args.Clone()
		ra.Set("batch", starlark.MakeInt64(p.Batch))
		ra.Set("grad_accum", starlark.MakeInt64(p.GradAccum))
		ra.Set("checkpoint", starlark.String(p.Checkpoint.Mode))
		ra.Set("parallel", plans.Parallel{P: par})
		ra.Set("cluster", plans.Cluster{C: p.Cluster})
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
		rows = append(rows, []starlark.Value{
			one(par.TP), one(par.PP), one(par.CP), starlark.String(cpMode), one(par.EP), one(par.DP), starlark.String(row.Sharding),
			starlark.MakeInt64(p.Batch), starlark.MakeInt64(p.GradAccum), starlark.String(schedule),
			starlark.MakeInt64(vs), starlark.String(p.Checkpoint.Mode),
			rep.TimeFigure(r.Time.StepSeconds), rep.TimeFigure(r.Time.MFU), rep.TimeFigure(r.Time.TokensPerS),
			starlark.MakeInt64(r.DeviceUsed), starlark.MakeInt64(r.Headroom), plan, rep,
		})
	}
	s := res.Stats
	m := base.SimPlan().Model
	title := fmt.Sprintf("search: %s on %d x %s, %d sequences of %d tokens per step", m.Name, sp.GPUs, base.SimPlan().Device.Name, sp.GlobalBatch, base.SimPlan().Seq)
	if m.Points > 0 {
		title = fmt.Sprintf("search: %s on %d x %s, %d samples of %d points per step", m.Name, sp.GPUs, base.SimPlan().Device.Name, sp.GlobalBatch, m.Points)
	}
	notes := []string{
		fmt.Sprintf("%d layouts (%d more rejected by the plan), %d pruned by model states and %d by held activations before any replay; %d replayed in full, %d fit",
			s.Layouts, s.Invalid, s.PrunedStates, s.PrunedMemory, s.Replayed, len(res.Rows)),
	}
	if len(res.Rows) == 0 {
		notes = append(notes, "no layout fits: more GPUs, a smaller micro-batch or global batch, or checkpoint=\"full\" may help")
	}
	t := NewResultTable(title, columns, units, rows, notes)
	t.color = st.Color
	return t, nil
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
