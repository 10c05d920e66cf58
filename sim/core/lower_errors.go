package core

// How a lowering fails: a model it cannot lower, a layout it refuses, a
// caller that stopped it.

import "github.com/memsh/memsh/sim/units"

// LowerError is raised (as a panic caught by Lower) when the model cannot
// be lowered: layers that do not chain, a size past what memsh counts.
type LowerError struct{ Err *units.Error }

// LayoutError is a lowering's refusal of the plan's layout rather than of
// its model: the same model lowers under another layout (torchao's float8
// linears under a tp that leaves a shard off torch._scaled_mm's
// alignment, float8_tp.go). It is raised as a panic, as LowerError is,
// and Lower returns it as it is; its text and its *units.Error (Unwrap)
// are Err's. search() rejects the layouts it refuses with its reason, as
// it does the plan's refusals, where any other lowering error stops the
// search.
type LayoutError struct{ Err *units.Error }

func (e *LayoutError) Error() string { return e.Err.Error() }

// Unwrap is the refusal as an engine error (errors.As finds it).
func (e *LayoutError) Unwrap() error { return e.Err }

// loweringError is the error of a lowering that panicked with r: a
// LowerError's, or a *LayoutError itself; any other panic goes on.
func loweringError(r any) error {
	switch e := r.(type) {
	case LowerError:
		return e.Err
	case *LayoutError:
		return e
	}
	panic(r)
}

// lowerStopped unwinds a lowering whose caller stopped it (checkStop);
// lowerProgram returns its error.
type lowerStopped struct{ err error }

// checkStop ends the lowering once the caller's context is done. It is
// looked at before each member and each repeated block, so that a
// script's timeout holds while a large model lowers, as the replay looks
// every StopEvery ops.
func (b *Builder) checkStop() {
	if b.stop == nil {
		return
	}
	if err := b.stop(); err != nil {
		panic(lowerStopped{err})
	}
}

// ShapeMismatch is the error of a layer whose input has not the features
// it expects.
func ShapeMismatch(b *Builder, kind string, want, got int64) LowerError {
	return LowerError{units.Errorf(b.Name(""), "%s expects inputs with %d features but the previous layer gives %d", kind, want, got)}
}
