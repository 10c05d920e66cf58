package advise

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/replay"
)

// Changes to settings of the model's layers that leave its maths alone: a
// graph model's chunks and a table's placement.

// maxChunks is the largest edge chunk count advice tries (anemoi's configs
// use up to 32; MET's validation ran 32 for the mappers).
const maxChunks = 64

// graphChanges raise a graph model's chunk settings (graph.Settings) by
// powers of two up to maxChunks, or a processor's segments to each
// divisor of its layers: eval chunks when the plan runs a validation pass
// or is an evaluation, the others when it trains.
func graphChanges(p *core.Plan, ask Ask) []Change {
	evals := p.Validation || p.Phase == core.Eval
	var out []Change
	for _, s := range graph.Settings(p.Model) {
		if (s.Eval && !evals) || (!s.Eval && p.Phase == core.Eval) {
			continue
		}
		var values []int64
		if s.Divide > 0 {
			for v := s.Value + 1; v <= s.Divide; v++ {
				if s.Divide%v == 0 {
					values = append(values, v)
				}
			}
		} else {
			for v := 2 * s.Value; v <= min(s.Max, maxChunks); v *= 2 {
				values = append(values, v)
			}
		}
		for _, v := range values {
			s, v := s, v
			out = append(out, one(s.Name+" of "+s.Layers, "model", ModelChange{
				Edit: func(m *core.Model) (*core.Model, error) { return graph.WithSetting(m, s, v) },
				Text: fmt.Sprintf("%s: %s=%d", s.Layers, s.Name, v),
			}))
		}
	}
	return out
}

// tableChanges move a sparse table on the card to host memory
// (table(..., placement="host")): its rows and moments leave the card and
// the rows read cross PCIe each step.
func tableChanges(p *core.Plan, ask Ask) []Change {
	var out []Change
	for _, l := range p.Model.Layers {
		core.Walk(l, "", func(_ string, x core.Layer) {
			t, ok := x.(*replay.Table)
			if !ok || t.Grad != "sparse" || (t.Placement != "" && t.Placement != "device") {
				return
			}
			out = append(out, one("placement of "+t.Label(), "model", ModelChange{
				Edit: func(m *core.Model) (*core.Model, error) {
					h := *t
					h.Placement = "host"
					return replaceLayer(m, t, &h)
				},
				Text: fmt.Sprintf("%s: placement=\"host\"", t.Label()),
			}))
		})
	}
	return out
}

// replaceLayer is a copy of m with layer old replaced by repl, copying the
// sequentials, repeats and residuals on the way to it.
func replaceLayer(m *core.Model, old, repl core.Layer) (*core.Model, error) {
	layers, found := replaceIn(m.Layers, old, repl)
	if !found {
		return nil, fmt.Errorf("model %q: cannot find layer %s to change", m.Name, old.Label())
	}
	out := *m
	out.Layers = layers
	return &out, nil
}

func replaceIn(ls []core.Layer, old, repl core.Layer) ([]core.Layer, bool) {
	out := append([]core.Layer(nil), ls...)
	for i, l := range out {
		if l == old {
			out[i] = repl
			return out, true
		}
		switch x := l.(type) {
		case *core.Sequential:
			if sub, ok := replaceIn(x.Layers, old, repl); ok {
				c := *x
				c.Layers = sub
				out[i] = &c
				return out, true
			}
		case *core.Repeat:
			if sub, ok := replaceIn([]core.Layer{x.Layer}, old, repl); ok {
				c := *x
				c.Layer = sub[0]
				out[i] = &c
				return out, true
			}
		case *core.Residual:
			if sub, ok := replaceIn([]core.Layer{x.Layer}, old, repl); ok {
				c := *x
				c.Layer = sub[0]
				out[i] = &c
				return out, true
			}
		}
	}
	return nil, false
}
