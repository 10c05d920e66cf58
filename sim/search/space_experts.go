package search

import (
	"fmt"
	"strconv"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// maxExperts is the most routed experts of any expert layer of m (0
// without one).
func maxExperts(m *core.Model) int64 {
	var e int64
	walkModel(m, func(l core.Layer) {
		if x, ok := l.(core.ExpertLayer); ok {
			e = max(e, x.ExpertCount())
		}
	})
	return e
}

// expertCounts is the routed experts of each expert layer of m.
func expertCounts(m *core.Model) []int64 {
	var out []int64
	walkModel(m, func(l core.Layer) {
		if x, ok := l.(core.ExpertLayer); ok {
			out = append(out, x.ExpertCount())
		}
	})
	return out
}

// HasExperts says whether m has an expert layer (a MoE), whose experts'
// tensor-parallel degree is a dimension of the space.
func HasExperts(m *core.Model) bool {
	has := false
	walkModel(m, func(l core.Layer) {
		if _, ok := l.(core.ExpertLayer); ok {
			has = true
		}
	})
	return has
}

// checkEP refuses an ep list (the user's, before defaults fill it) the
// space cannot use: a degree above 1 for a model without experts, or one
// that does not divide a layer's experts. The plan rejected each such
// layout, and a search of ep=[2] on a dense model, or ep=[3] on four
// experts, ended with no layout and "more GPUs may help".
func (sp Space) checkEP(base *core.Plan) error {
	counts := expertCounts(base.Model)
	for _, ep := range sp.EP {
		if ep > 1 && len(counts) == 0 {
			return &units.Error{Path: "search", Msg: fmt.Sprintf("ep=%v: model %s has no experts to spread", sp.EP, base.Model.Name),
				Hint: "ep is the expert-parallel degree of a MoE's experts; drop it for a dense model"}
		}
		for _, e := range counts {
			if e%ep != 0 { // nn.MoE's CheckLayout refuses it
				return &units.Error{Path: "search", Msg: fmt.Sprintf("ep=%d does not divide the %d experts of a layer of model %s", ep, e, base.Model.Name),
					Hint: "ep spreads each MoE layer's experts evenly over its ranks: list divisors of the experts, or leave ep= out for all of them"}
			}
		}
	}
	return nil
}

// checkExpertTP refuses an expert_tp list the space cannot use: one for
// a model without experts, or a degree that is neither 1 nor a tp of the
// space (core.Parallelism.ETP is 1 or tp). sp.TP is filled.
func (sp Space) checkExpertTP(base *core.Plan) error {
	if sp.ExpertTP == nil {
		return nil
	}
	if !HasExperts(base.Model) {
		return &units.Error{Path: "search", Msg: fmt.Sprintf("expert_tp=%v: model %s has no experts", sp.ExpertTP, base.Model.Name),
			Hint: "expert_tp is the tensor-parallel degree of a MoE's experts; drop it for a dense model"}
	}
	for _, d := range sp.ExpertTP {
		ok := d == 1
		for _, tp := range sp.TP {
			ok = ok || d == tp
		}
		if !ok {
			return &units.Error{Path: "search", Msg: fmt.Sprintf("expert_tp=%d is neither 1 nor a tp of the space (tp: %s)", d, intsText(sp.TP)),
				Hint: "expert_tp=1 keeps each expert whole on every tensor-parallel rank; expert_tp=tp splits it like the dense layers"}
		}
	}
	return nil
}

// intsText writes ns as a comma-separated list.
func intsText(ns []int64) string {
	var b []byte
	for i, n := range ns {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(b)
}

// expertChoices is the experts' layouts at tensor-parallel degree tp
// (wholeExperts: expert_tp=1 with tp > 1): without experts or at tp 1
// the one there is, else those of the expert_tp list (default both).
func (sp Space) expertChoices(moe bool, tp int64) []bool {
	allowed := func(d int64) bool {
		if sp.ExpertTP == nil {
			return true
		}
		for _, x := range sp.ExpertTP {
			if x == d {
				return true
			}
		}
		return false
	}
	if !moe || tp == 1 {
		if !moe || allowed(1) {
			return splitOnly
		}
		return nil
	}
	switch a, b := allowed(tp), allowed(1); {
	case a && b:
		return bothExpertLayouts
	case a:
		return splitOnly
	case b:
		return wholeOnly
	}
	return nil
}

// expertLayout is a layout's expert degrees: ep, and whether expert_tp
// is 1 with tp > 1.
type expertLayout struct {
	ep    int64
	whole bool
}

var (
	splitOnly         = []bool{false}
	wholeOnly         = []bool{true}
	bothExpertLayouts = []bool{false, true}
)

func walkModel(m *core.Model, fn func(core.Layer)) {
	for _, l := range m.Layers {
		core.Walk(l, core.ChildPath("", nil, l), func(_ string, l core.Layer) { fn(l) })
	}
}
