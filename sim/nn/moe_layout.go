package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// What a layout may do to a MoE block: the checks of its expert and
// tensor parallel degrees and routing loads.

// CheckLayout checks that expert parallelism divides the experts, the
// experts' tensor parallelism their hidden size (tensor parallelism the
// shared experts'), and that expert_load, and expert_spread's largest
// draw, stay within dropless routing's worst case.
func (m *MoE) CheckLayout(path string, par core.Parallelism) error {
	if err := m.checkDenseLayout(path, par); err != nil {
		return err
	}
	tp, etp, ep := max(par.TP, 1), par.ETPn(), max(par.EP, 1)
	worst := core.ExpertWorstLoad(ep, m.Experts, m.TopK)
	switch {
	case m.Experts%ep != 0:
		return &units.Error{Path: path, Msg: fmt.Sprintf("ep=%d does not divide %d experts", ep, m.Experts)}
	case m.Hidden%etp != 0:
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the expert hidden size %d", etp, m.Hidden)}
	case m.SharedExperts > 0 && m.shared().Hidden%tp != 0:
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the shared experts' hidden size %d", tp, m.shared().Hidden)}
	case par.RouterDType != units.InvalidDType && (m.impl() == MoELoop || m.LinearRouter) && m.router() == RouterSoftmax:
		// Mixtral's router under the loop is HF's nn.Linear gate under
		// autocast (route): Megatron's TopKRouter, whose gating GEMM
		// router_dtype casts, is not there, and a setting that changed
		// nothing would be a silent wrong figure.
		return &units.Error{Path: path, Msg: `router_dtype= is Megatron-Core's TopKRouter dtype, and this moe() runs HF's per-expert loop (impl="loop") with Mixtral's router, an nn.Linear gate under autocast`,
			Hint: `use moe(impl="grouped"), Megatron's grouped experts, or drop router_dtype=`}
	case par.ExpertLoad > worst:
		return &units.Error{Path: path, Msg: fmt.Sprintf("expert_load=%g exceeds the worst case of %g balanced shares (ep=%d, %d experts, top-%d)", par.ExpertLoad, worst, ep, m.Experts, m.TopK),
			Hint: "the worst case is every token of the ep ranks choosing min(top_k, experts/ep) of one rank's experts: expert_load=\"worst\""}
	case par.ExpertSpread > 0 && m.Capacity > 0:
		// A capacity factor pads every expert's rows to its capacity
		// (route): the buffers do not change size with the routing, and
		// the replay varies only dropless layers' rows (markRouted).
		return &units.Error{Path: path, Msg: fmt.Sprintf("expert_spread=%g varies the routed rows of dropless routing, and this moe() pads every expert to capacity=%g: the spread would change nothing", par.ExpertSpread, m.Capacity),
			Hint: "drop expert_spread, or capacity for dropless routing"}
	case par.ExpertSpread > 0 && spreadTop(par, worst) > worst:
		// The replay draws up to (1 + spread) times the load's rows
		// (replay/routing.go); no routing sends a rank more than the
		// worst case, so a draw past it would be a buffer no run makes.
		return &units.Error{Path: path, Msg: fmt.Sprintf("expert_spread=%g draws up to %.4g balanced shares, past the worst case of %g (ep=%d, %d experts, top-%d)", par.ExpertSpread, spreadTop(par, worst), worst, ep, m.Experts, m.TopK),
			Hint: "no routing sends a rank more rows than the worst case: keep expert_load x (1 + expert_spread) within it (expert_load=\"worst\" leaves no room to spread)"}
	}
	return nil
}

// spreadTop is the most balanced shares expert_spread's draws reach: the
// plan's load (expert_load, or the worst case) times 1 + spread.
func spreadTop(par core.Parallelism, worst float64) float64 {
	load := max(par.ExpertLoad, 1)
	if par.ExpertWorst {
		load = worst
	}
	return load * (1 + par.ExpertSpread)
}
