package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Wrappable is a layer that checks checkpoint(modules=[...]) itself when it
// is lowered, because it wraps modules by more than the kinds and labels of
// its layer tree: an anemoi graph model wraps its mappers' inner modules by
// path ("decoder.proc.conv") and refuses the others with its own hint.
type Wrappable interface {
	WrappableModules() []string
}

// moduleNames is every name checkpoint(modules=[...]) can match in the
// model, each layer's kind and label; wrappable says a Wrappable layer
// checks the names itself.
func (m *Model) moduleNames() (names []string, wrappable bool) {
	for _, l := range m.Layers {
		Walk(l, "", func(_ string, l Layer) {
			names = append(names, l.Kind())
			if l.Label() != "" {
				names = append(names, l.Label())
			}
			if _, ok := l.(Wrappable); ok {
				wrappable = true
			}
		})
	}
	slices.Sort(names)
	return slices.Compact(names), wrappable
}

// checkModules refuses checkpoint(modules=[...]) names that match no layer
// of the model: PyTorch's wrapper would fail to find the module, and a
// silently unwrapped model is a wrong number.
func (p *Plan) checkModules() error {
	if p.Checkpoint.Mode != "modules" || p.Model == nil {
		return nil
	}
	known, wrappable := p.Model.moduleNames()
	if wrappable {
		return nil
	}
	for _, n := range p.Checkpoint.Modules {
		if slices.Contains(known, n) {
			continue
		}
		hint := "the model's layer kinds and names are " + strings.Join(known, ", ")
		if len(known) > 24 {
			hint = "the model's layer kinds and names include " + strings.Join(known[:24], ", ") + ", ... (r.modules lists them)"
		}
		return &units.Error{Path: "train", Msg: fmt.Sprintf("checkpoint(modules=...) names %q, which is neither the kind nor the name of any layer of the model", n), Hint: hint}
	}
	return nil
}
