package core

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/units"
)

// Expert parallelism in detail (Megatron-LM's MoE parallel folding,
// megatron/core/transformer/moe/; the "alltoall" token dispatcher):
//
//   - ep ranks split each MoE's experts (experts/ep per rank), taken from
//     the data-parallel group; the routed token copies go to the ranks
//     holding their experts by an all-to-all (dispatch) and come back by
//     another (combine).
//   - expert_tp (Megatron's --expert-tensor-parallel-size, ETP): the
//     tensor-parallel degree of the experts, tp (the default: each expert's
//     hidden size split like the dense MLP's, the tokens gathered along the
//     sequence first and the partial outputs reduce-scattered after) or 1
//     (whole experts; each tensor-parallel rank routes its own
//     sequence-parallel tokens, so sequence_parallel is required). The
//     experts' gradients and optimizer state shard over the
//     expert-data-parallel ranks: dp x cp x tp / (ep x expert_tp).
//   - expert_load: how many times the balanced share of routed tokens the
//     busiest rank receives, which sizes the dispatch all-to-all's output,
//     the experts' activations and the combine all-to-all's input.
//     Dropless routing (no capacity factor) is balanced only on average:
//     its worst case (expert_load="worst") is every token of the ep ranks
//     choosing min(top_k, experts/ep) of this rank's experts:
//     ep x min(top_k, experts/ep) / top_k times the balanced share. With a
//     capacity factor every expert receives exactly its capacity, so
//     expert_load does not apply. This is the knob a MoE model's planner
//     turns (issue 19 builds DeepSeek-style MoE models on it).

// ETPn is the experts' tensor-parallel degree (expert_tp; tp when unset).
func (p Parallelism) ETPn() int64 {
	if p.ETP > 0 {
		return p.ETP
	}
	return OrOne(p.TP)
}

// ExpertWorstLoad is dropless routing's worst-case load of one rank, in
// balanced shares, for a MoE of experts routing topK each (see above).
func ExpertWorstLoad(ep, experts, topK int64) float64 {
	if ep <= 1 || topK <= 0 {
		return 1
	}
	return float64(ep*min(topK, experts/ep)) / float64(topK)
}

// ExpertRows is the rows of routed token copies the busiest rank's
// experts receive when routed copies leave each rank: routed times the
// plan's expert_load, capped at the worst case (with one rank, or a
// capacity factor, routed itself).
func (l parLowering) ExpertRows(routed, experts, topK int64, capacity bool) int64 {
	if l.Epn() == 1 || capacity || (l.expertLoad <= 1 && !l.expertWorst) {
		return routed
	}
	worst := ExpertWorstLoad(l.Epn(), experts, topK)
	load := min(max(l.expertLoad, 1), worst)
	if l.expertWorst {
		load = worst
	}
	return int64(math.Ceil(float64(routed) * load))
}

// SP reports whether the lowering runs sequence parallelism (tp > 1).
func (l parLowering) SP() bool { return l.sp && l.Tp > 1 }

// Etpn is the experts' tensor-parallel degree in the lowering.
func (l parLowering) Etpn() int64 {
	if l.etp > 0 {
		return l.etp
	}
	return l.Tpn()
}

// validateExperts checks the expert options against themselves.
func (par Parallelism) validateExperts() error {
	if par.ETP < 0 {
		return parallelErr("expert_tp must be positive (got %d)", par.ETP)
	}
	if par.ETP > 0 && par.ETP != 1 && par.ETP != par.TP {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("expert_tp=%d must be 1 or tp=%d", par.ETP, par.TP),
			Hint: "memsh splits experts like the dense layers (expert_tp=tp) or keeps them whole (expert_tp=1)"}
	}
	if par.ETP == 1 && par.TP > 1 && !par.SequenceParallel {
		return &units.Error{Path: "parallel", Msg: "expert_tp=1 with tp > 1 needs sequence_parallel=True",
			Hint: "each tensor-parallel rank routes its own sequence-parallel tokens to whole experts (Megatron requires sequence parallelism with MoE and tp > 1)"}
	}
	if !(par.ExpertLoad == 0 || par.ExpertLoad >= 1) || math.IsInf(par.ExpertLoad, 0) {
		return parallelErr("expert_load must be at least 1, the balanced share (got %g)", par.ExpertLoad)
	}
	if (par.ExpertLoad > 1 || par.ExpertWorst) && par.EP <= 1 {
		return &units.Error{Path: "parallel", Msg: "expert_load needs ep > 1", Hint: "it sizes the buffers of the expert-parallel all-to-all"}
	}
	if !(par.ExpertSpread >= 0 && par.ExpertSpread < 1) {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("expert_spread must be in [0, 1) (got %g)", par.ExpertSpread),
			Hint: "it is how far a rank's routed rows stray from their share, as a fraction: 0.1 draws each layer's rows from 0.9 to 1.1 shares"}
	}
	if par.ExpertSpread > 0 && par.EP <= 1 {
		return &units.Error{Path: "parallel", Msg: "expert_spread needs ep > 1",
			Hint: "without expert parallelism a rank's experts run on the rows it holds, tokens x top_k whatever the routing"}
	}
	return nil
}
