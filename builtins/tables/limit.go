package tables

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/sim/advise"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// max_batch(plan) and max_seq(plan): the largest micro-batch or sequence
// that fits (sim/advise), as a "limit" value.

// Limit is the Starlark value of max_batch() and max_seq() (type "limit"):
// the value, the plan and report at it, and the next value up that does
// not fit with its report.
type Limit struct {
	l     *advise.Limit
	plan  *plans.Plan
	rep   *reports.Report
	next  *reports.Report // nil when capped or when the plan rejects the next value
	color bool
}

var _ starlark.HasAttrs = (*Limit)(nil)

func (x *Limit) Type() string         { return "limit" }
func (x *Limit) Freeze()              {}
func (x *Limit) Truth() starlark.Bool { return x.l.Value > 0 }
func (x *Limit) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: limit")
}

var limitAttrNames = []string{"capped", "keyword", "next", "next_error", "next_report", "plan", "replays", "report", "value"}

func (x *Limit) AttrNames() []string { return limitAttrNames }

func (x *Limit) Attr(name string) (starlark.Value, error) {
	l := x.l
	switch name {
	case "keyword":
		return starlark.String(l.Keyword), nil
	case "value":
		return starlark.MakeInt64(l.Value), nil
	case "plan":
		return x.plan, nil
	case "report":
		return x.rep, nil
	case "capped":
		return starlark.Bool(l.Capped), nil
	case "replays":
		return starlark.MakeInt(l.Replays), nil
	case "next":
		if l.Capped {
			return starlark.None, nil
		}
		return starlark.MakeInt64(l.Next), nil
	case "next_report":
		if x.next == nil {
			return starlark.None, nil
		}
		return x.next, nil
	case "next_error":
		if l.NextErr == nil {
			return starlark.None, nil
		}
		return starlark.String(l.NextErr.Error()), nil
	}
	return nil, nil
}

// String says the value and why the next one up does not fit:
//
//	max_batch 6: batch 7 runs out of memory at 1.20 GiB bf16[7, 2048, 4096] layers.3.mlp.act (backward); 10 replays
func (x *Limit) String() string {
	l := x.l
	head := fmt.Sprintf("max_%s %d", l.Keyword, l.Value)
	if l.Capped {
		return fmt.Sprintf("%s or more: the largest tried fits (%s of %s used); %s", head,
			units.FormatBytes(l.Report.DeviceUsed), units.FormatBytes(l.Report.Capacity), host.Count(int64(l.Replays), "replay", "replays"))
	}
	why := ""
	switch r := l.NextReport; {
	case l.NextErr != nil:
		why = "is rejected: " + l.NextErr.Error()
	case r != nil && r.OOM != nil:
		a := r.OOM.Alloc
		why = fmt.Sprintf("runs out of memory at %s %s%s %s (%s)", units.FormatBytes(a.Bytes), a.DType, shapeText(a.Shape), a.Tensor, a.Phase)
	case r != nil:
		why = fmt.Sprintf("uses %s, over the budget", units.FormatBytes(r.DeviceUsed))
	}
	return fmt.Sprintf("%s: %s %d %s; %s", head, l.Keyword, l.Next, why, host.Count(int64(l.Replays), "replay", "replays"))
}

func LimitBuiltins() []host.Builtin {
	doc := func(what, how string) string {
		return "The largest " + what + " of plan that fits, by replay: max_" + how + "(plan). The value doubles until a step " +
			"does not fit, then bisection finds the boundary (about 2 log2 of the answer replays, under 50). budget is the " +
			"device memory the step may use: bytes or a fraction of the GPU's (default: all of it). Returns a limit: .value " +
			"(0 when even the smallest does not fit), .plan and .report at it, .next (the first value that does not fit), " +
			".next_report (its .oom names the tensor that fails), .next_error (when the plan rejects the next value), " +
			".capped (the largest value tried fits: more may) and .replays; print() says it in one line. The allocated " +
			"bytes grow with the value, but device_used need not: the caching allocator's cached blocks fit a larger " +
			"step's tensors differently, and it can reserve less (docs/device-memory.md); with a budget near such a dip a " +
			"larger value past the boundary can fit again."
	}
	return []host.Builtin{
		{Name: "max_batch", Sig: "max_batch(plan, budget=None)",
			Doc: doc("micro-batch (sequences per GPU per forward; grad_accum and the rest as they are)", "batch"),
			Fn:  limitFn(advise.MaxBatch, "batch")},
		{Name: "max_seq", Sig: "max_seq(plan, budget=None)",
			Doc: doc("sequence length (in steps of cp, and of tp with sequence parallelism)", "seq"),
			Fn:  limitFn(advise.MaxSeq, "seq")},
	}
}

func limitFn(find func(context.Context, *core.Plan, int64) (*advise.Limit, error), keyword string) host.BuiltinFunc {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var pv, budget starlark.Value = nil, starlark.None
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "plan", &pv, "budget?", &budget); err != nil {
			return nil, err
		}
		plan, ok := pv.(*plans.Plan)
		if !ok {
			return nil, fmt.Errorf("%s: plan must be a plan from train() (got %s)", b.Name(), pv.Type())
		}
		bytes, err := budgetBytes(budget, plan)
		if err != nil {
			return nil, err
		}
		st := host.StateOf(thread)
		ctx := st.Context
		if ctx == nil {
			ctx = context.Background()
		}
		l, err := find(ctx, plan.SimPlan(), bytes)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil, host.StopError(ctx, b.Name(), "")
			}
			return nil, host.WithOrigin(err, plan.Decl())
		}
		a := plan.Args.Clone()
		v := l.Value
		if v == 0 {
			v = l.Next // the smallest, which does not fit
		}
		a.Set(keyword, starlark.MakeInt64(v))
		at, err := plans.NewPlan(a, host.CallerPos(thread))
		if err != nil {
			return nil, fmt.Errorf("internal error: %s at %d: %v", b.Name(), v, err)
		}
		out := &Limit{l: l, plan: at.(*plans.Plan), color: st.Color}
		out.rep = reports.NewReport(l.Report, out.plan, st.Color)
		if l.NextReport != nil {
			a := plan.Args.Clone() // the plan at the value keeps its own
			a.Set(keyword, starlark.MakeInt64(l.Next))
			np, err := plans.NewPlan(a, host.CallerPos(thread))
			if err != nil {
				return nil, fmt.Errorf("internal error: %s at %d: %v", b.Name(), l.Next, err)
			}
			out.next = reports.NewReport(l.NextReport, np.(*plans.Plan), st.Color)
		}
		return out, nil
	}
}

// shapeText writes a shape as reports do: [2, 2048, 4096].
func shapeText(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
