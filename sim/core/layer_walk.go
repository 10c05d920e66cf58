package core

// eachLayer calls fn for l and every layer below it, depth first, in
// Walk's order, without their paths, until fn returns false; it says
// whether every call returned true. Walk builds a path for each layer
// (two or three string joins), and a search checks every layout it
// enumerates over the whole model (Model.validateParallel): those joins
// were a tenth of BenchmarkSearchLlama70B1024's heap allocations. The
// structural layers' children are read without Children's slice.
func eachLayer(l Layer, fn func(Layer) bool) bool {
	if !fn(l) {
		return false
	}
	switch x := l.(type) {
	case *Residual:
		return eachLayer(x.Layer, fn)
	case *Repeat:
		if x.Blocks == nil {
			return eachLayer(x.Layer, fn)
		}
	case *Sequential:
		for _, c := range x.Layers {
			if !eachLayer(c, fn) {
				return false
			}
		}
		return true
	}
	for _, c := range l.Children() {
		if !eachLayer(c, fn) {
			return false
		}
	}
	return true
}

// AnyLayer reports whether fn holds for a layer of model m, any depth,
// without building paths (eachLayer): a check a replay makes once per
// evaluation. A nil model has none.
func AnyLayer(m *Model, fn func(Layer) bool) bool {
	if m == nil {
		return false
	}
	for _, l := range m.Layers {
		if !eachLayer(l, func(x Layer) bool { return !fn(x) }) {
			return true
		}
	}
	return false
}
