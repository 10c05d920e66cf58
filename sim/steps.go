package sim

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// EvaluateSteps replays len(s.TableRows) consecutive training steps of the
// plan through one allocator instance. Parameters, master weights,
// optimizer state and the cuBLAS workspace persist across steps; each
// step's gradients, batch and table tensors are freed at its end, as
// optimizer.zero_grad(set_to_none=True) and the training loop do.
func EvaluateSteps(plan *core.Plan, opts core.Options, s replay.StepSeries) (*replay.StepsReport, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if plan.Phase == core.Eval {
		return nil, &units.Error{Path: "table_steps", Msg: "a step series needs a training plan (got phase=\"eval\")"}
	}
	pool := s.Pool
	switch pool {
	case "":
		pool = "torch"
	case "torch", "exact":
	default:
		return nil, &units.Error{Path: "table_steps", Msg: fmt.Sprintf("unknown pool %q (known: torch, exact)", s.Pool),
			Hint: "torch: PyTorch's caching allocator alone; exact: a buffer pool keyed by exact size in front of it"}
	}
	if len(s.TableRows) == 0 {
		return nil, &units.Error{Path: "table_steps", Msg: "rows_per_step is empty", Hint: "give the distinct rows per head of each step, e.g. [8000, 7900, 8100]"}
	}
	prog, err := plan.LowerProgram()
	if err != nil {
		return nil, err
	}
	if err := replay.CheckSteps(prog, s.TableRows); err != nil {
		return nil, err
	}
	first, err := Evaluate(plan, opts)
	if err != nil {
		return nil, err
	}
	return replay.RunSteps(prog, plan, opts, first, s.TableRows, pool)
}
