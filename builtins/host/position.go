package host

import (
	"errors"
	"fmt"

	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// CallerPos returns the position of the Starlark call to the running
// builtin (thread.CallFrame(1).Pos): where a constructor was called, to
// record as the declaration of the value it returns. It returns the zero
// Position when the builtin was called from Go with no Starlark caller.
func CallerPos(thread *starlark.Thread) syntax.Position {
	if thread == nil || thread.CallStackDepth() < 2 {
		return syntax.Position{}
	}
	return thread.CallFrame(1).Pos
}

// PosString formats pos as "file:line:col", or "" for an invalid position.
func PosString(pos syntax.Position) string {
	if !pos.IsValid() {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", pos.Filename(), pos.Line, pos.Col)
}

// WithOrigin returns err with the declaration position decl filled into a
// *sim.Error's Origin (when err is or wraps one that has none). The
// *sim.Error is copied, never modified. Other errors pass through.
func WithOrigin(err error, decl syntax.Position) error {
	var se *units.Error
	if err == nil || !errors.As(err, &se) || se.Origin != "" || !decl.IsValid() {
		return err
	}
	c := *se
	c.Origin = PosString(decl)
	if se == err {
		return &c
	}
	return &originError{err: err, sim: &c}
}

// originError keeps err's message and chain but answers errors.As for
// *sim.Error with the copy that carries the origin.
type originError struct {
	err error
	sim *units.Error
}

func (e *originError) Error() string { return e.err.Error() }
func (e *originError) Unwrap() error { return e.err }
func (e *originError) As(target any) bool {
	if p, ok := target.(**units.Error); ok {
		*p = e.sim
		return true
	}
	return false
}
