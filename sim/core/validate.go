package core

// Exported entry points for the Starlark layer, which validates each layer
// as it is built so that errors point at the constructor call.

// ValidateLayer checks l's sizes and options (and those of every layer
// below it); path names l in errors ("attention", "layers.attn").
func ValidateLayer(l Layer, path string) error {
	if err := checkLayerTree(l); err != nil { // a tree that validate can walk
		return err
	}
	if err := l.Validate(path); err != nil {
		return err
	}
	return checkLayerSizes(l) // no wrapped parameter counts
}

// TakesTokens reports whether the model starts with an embedding, so its
// input is token ids and a plan needs a sequence length.
func (m *Model) TakesTokens() bool { return startsWithEmbedding(m.Layers) }

// CheckShapes lowers the model for a micro-batch of one sequence of one
// position in fp32, to find layers whose widths do not chain (a linear
// expecting 4096 features after one that gives 1024) when the model is
// built rather than when a plan is simulated. A layer that cannot lower
// at that size is left for Evaluate to check with the real plan.
func (m *Model) CheckShapes() error {
	_, err := m.lowerForCheck()
	return err
}

// lowerForCheck is CheckShapes' lowering; it also returns the program
// (nil when the lowering failed or panicked).
func (m *Model) lowerForCheck() (prog *Program, err error) {
	defer func() {
		if recover() != nil {
			prog, err = nil, nil
		}
	}()
	fp32, _ := LookupPrecision("fp32")
	rt, _ := LookupRuntime("cuda")
	p := &Plan{Model: m, Batch: 1, Seq: 1, GradAccum: 1, Members: 1, Precision: fp32, Runtime: rt,
		Optimizer: Optimizer{Kind: SGD}, Checkpoint: Checkpoint{Mode: "none"}, Phase: Train}
	return p.LowerProgram()
}

// HeadShape returns the shape of the output head, [vocab, width], and of
// the first embedding, [rows, dim] (nil when there is none), so a caller
// can check that tied weights have the same shape.
func (m *Model) HeadShape() (head, embedding []int64) {
	head = []int64{m.Vocab, m.outDim()}
	if e := m.firstEmbedding(); e != nil {
		rows, dim := e.LookupShape()
		embedding = []int64{rows, dim}
	}
	return head, embedding
}
