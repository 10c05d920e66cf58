package core

import "strconv"

// appendChildPath appends ChildPath(parent, of, c) to path, whose bytes
// are parent's: the same text, written into the caller's buffer rather
// than a string of its own.
func appendChildPath(path []byte, of, c Layer) []byte {
	dot := func() {
		if len(path) > 0 {
			path = append(path, '.')
		}
	}
	if r, ok := of.(*Repeat); ok {
		dot() // joinPath: the blocks are never empty
		switch {
		case r.Blocks != nil:
			path = append(path, indexRanges(r.indices(c))...)
		case r.N > 1:
			path = strconv.AppendInt(append(path, '0', '-'), r.N-1, 10)
		default:
			path = append(path, '0')
		}
	}
	if name := ModuleName(c); name != "" {
		dot()
		path = append(path, name...)
	}
	return path
}

// layoutPaths is validateParallelPaths' walk: the model's layers in
// eachLayer's order, each with its path written into one buffer
// (appendChildPath) rather than a string per layer, which only the
// refusal it words is made from (a search refuses tens of thousands of
// layouts, each at its first attention: Walk's paths and Children's
// slices were 4 of BenchmarkSearchLlama70B1024's 338 MB/op). The layers
// of the first passed visits passed the same checks in
// validateParallel's walk, which checks without paths: they are not
// checked again (whether a check fails does not depend on the path,
// LayoutChecker).
type layoutPaths struct {
	par    Parallelism
	passed int // visits that passed validateParallel's checks
	// checker: validateParallel's walk stopped at the next visit, whose
	// LayoutChecker refused the layout (its error is made once more,
	// with the path, and not checked first).
	checker  bool
	visits   int
	moe      bool
	err      error
	vocabErr error // vocabulary errors after the layers' own
}

// walk visits l, whose path is path, and the layers below it, until a
// layer's check fails (the first failure's error is kept).
func (w *layoutPaths) walk(l Layer, path []byte) bool {
	if !w.visit(l, path) {
		return false
	}
	switch x := l.(type) {
	case *Residual:
		return w.walk(x.Layer, appendChildPath(path, l, x.Layer))
	case *Repeat:
		if x.Blocks == nil {
			return w.walk(x.Layer, appendChildPath(path, l, x.Layer))
		}
	case *Sequential:
		for _, c := range x.Layers {
			if !w.walk(c, appendChildPath(path, l, c)) {
				return false
			}
		}
		return true
	}
	for _, c := range l.Children() {
		if !w.walk(c, appendChildPath(path, l, c)) {
			return false
		}
	}
	return true
}

// visit checks one layer; false stops the walk at a layer's error.
func (w *layoutPaths) visit(l Layer, path []byte) bool {
	if _, ok := l.(ExpertLayer); ok {
		w.moe = true
	}
	w.visits++
	if w.visits <= w.passed {
		return true
	}
	c, checks := l.(LayoutChecker)
	if checks && (w.checker && w.visits == w.passed+1 || !layoutFits(c, w.par)) {
		w.err = c.CheckLayout(string(path), w.par)
		if w.err != nil {
			return false
		} // a FitsLayout that refused what CheckLayout accepts: the layer passes, as CheckLayout says
	}
	if e, ok := l.(TokenLookup); ok && w.vocabErr == nil {
		if rows, _ := e.LookupShape(); rows%w.par.TP != 0 {
			w.vocabErr = vocabRowsError(string(path), w.par.TP, rows)
		}
	}
	return true
}
