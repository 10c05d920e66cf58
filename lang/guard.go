package lang

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Starlark's built-in functions run in Go between two steps of the
// interpreter, so neither the step limit nor a cancelled run stops them,
// and a Go panic in one (makeslice: cap out of range) escapes as a stack
// dump. memsh predeclares guarded copies of them:
//
//   - range() returns a range whose iteration from Go (max, any, sorted,
//     list.extend, str.join, ...) counts one step per element and stops
//     when the run is cancelled or out of steps, which then ends the
//     statement: max(range(2**62)) is a step-limit error, not a hang;
//   - the builtins that allocate for a sequence's whole length at once
//     (list, tuple, sorted, reversed, enumerate, zip) refuse a range
//     longer than fits in the memory limit (or in 2^30 elements, the bound
//     Starlark puts on [x] * n), instead of a fatal out-of-memory;
//   - a Go panic in any of them is an error at the call.

// guardEvery is how many elements a guarded range yields between looks
// at the run's context and step count.
const guardEvery = 4096

// valueBytes is the size of one Starlark value in a list: an interface.
const valueBytes = 16

// maxElements is Starlark's own bound on one allocation ([x] * n).
const maxElements = 1 << 30

// materializes says whether the builtin name allocates for its
// arguments' whole length at once.
func materializes(name string) bool {
	switch name {
	case "list", "tuple", "sorted", "reversed", "enumerate", "zip":
		return true
	}
	return false
}

// guardUniverse adds guarded copies of Starlark's built-in functions to
// pre, for the interpreter in.
func (in *Interpreter) guardUniverse(pre starlark.StringDict) {
	for name, v := range starlark.Universe {
		b, ok := v.(*starlark.Builtin)
		if !ok {
			continue
		}
		if _, taken := pre[name]; taken {
			continue
		}
		pre[name] = starlark.NewBuiltin(name, in.guardBuiltin(b))
	}
}

// guardBuiltin wraps the universe builtin b.
func (in *Interpreter) guardBuiltin(b *starlark.Builtin) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	return func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (v starlark.Value, err error) {
		defer func() {
			if r := recover(); r != nil {
				v, err = nil, fmt.Errorf("internal error in %s: %v", name, r)
			}
		}()
		if materializes(name) {
			if err := in.checkMaterialize(name, args); err != nil {
				return nil, err
			}
		}
		v, err = starlark.Call(thread, b, args, kwargs)
		if r, ok := v.(rangeValue); ok && name == "range" {
			v = &guardedRange{Value: r, in: in}
		}
		return v, err
	}
}

// rangeValue is what the universe range() returns.
type rangeValue interface {
	starlark.Sequence
	starlark.Indexable
	starlark.Sliceable
	starlark.Comparable
	starlark.Container
}

// checkMaterialize refuses a range argument too long for one allocation.
func (in *Interpreter) checkMaterialize(name string, args starlark.Tuple) error {
	limit := int64(maxElements)
	if m := in.opts.MaxMemory; m > 0 {
		limit = min(limit, m/valueBytes)
	}
	for _, a := range args {
		r, ok := a.(*guardedRange)
		if !ok {
			continue
		}
		if n := int64(r.Len()); n > limit {
			return fmt.Errorf("%s of %s would hold %d values (%s at least), more than memsh makes at once (%s)",
				name, r, n, units.FormatBytes(min(n, units.MaxBytes/valueBytes)*valueBytes), in.materializeBound(limit))
		}
	}
	return nil
}

// materializeBound words the bound of checkMaterialize.
func (in *Interpreter) materializeBound(limit int64) string {
	if limit < maxElements {
		return fmt.Sprintf("the memory limit of %s: use --max-memory to raise it", units.FormatBytes(in.opts.MaxMemory))
	}
	return fmt.Sprintf("%d values", maxElements)
}

// guardedRange is a range whose iteration from Go counts steps and stops
// when the run is cancelled. Everything else is the range's.
type guardedRange struct {
	starlark.Value // a rangeValue
	in             *Interpreter
}

var (
	_ starlark.Sequence   = (*guardedRange)(nil)
	_ starlark.Indexable  = (*guardedRange)(nil)
	_ starlark.Sliceable  = (*guardedRange)(nil)
	_ starlark.Comparable = (*guardedRange)(nil)
	_ starlark.Container  = (*guardedRange)(nil)
)

func (r *guardedRange) inner() rangeValue                  { return r.Value.(rangeValue) }
func (r *guardedRange) Len() int                           { return r.inner().Len() }
func (r *guardedRange) Index(i int) starlark.Value         { return r.inner().Index(i) }
func (r *guardedRange) Has(y starlark.Value) (bool, error) { return r.inner().Has(y) }

func (r *guardedRange) Slice(start, end, step int) starlark.Value {
	return &guardedRange{Value: r.inner().Slice(start, end, step), in: r.in}
}

func (r *guardedRange) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	if g, ok := y.(*guardedRange); ok {
		y = g.Value
	}
	return starlark.CompareDepth(op, r.Value, y, depth)
}

func (r *guardedRange) Iterate() starlark.Iterator {
	return &guardedIterator{it: r.inner().Iterate(), in: r.in, thread: r.in.current.Load()}
}

// guardedIterator counts the elements it yields as steps of the thread
// running when the iteration began.
type guardedIterator struct {
	it     starlark.Iterator
	in     *Interpreter
	thread *starlark.Thread
	n      int
}

func (it *guardedIterator) Next(p *starlark.Value) bool {
	if it.n++; it.n%guardEvery == 0 && it.stop() {
		return false
	}
	return it.it.Next(p)
}

func (it *guardedIterator) Done() { it.it.Done() }

// stop charges the elements yielded since the last look to the thread and
// says whether the run must end: its context is done or the steps ran
// out. It cancels the thread then, so that the statement ends with the
// reason at its next step (the context's own cancellation of the thread
// runs on another goroutine, maybe later).
func (it *guardedIterator) stop() bool {
	t := it.thread
	if ctx := it.in.state.Context; ctx != nil && ctx.Err() != nil {
		if t != nil {
			t.Cancel(cancelReason(ctx))
		}
		return true
	}
	if t == nil {
		return false
	}
	t.Steps += guardEvery
	if t.Steps >= it.in.opts.MaxSteps {
		t.Cancel(stepsExceeded(it.in.opts.MaxSteps))
		return true
	}
	return false
}

// stepsExceeded is the reason a thread stops at the step limit.
func stepsExceeded(max uint64) string {
	return fmt.Sprintf("execution exceeded %d steps (use --max-steps to raise)", max)
}

// recoverPanic turns a Go panic while running a script into an error,
// instead of a stack dump: what names the file or chunk.
func recoverPanic(what string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("internal error while running %s: %v", what, r)
	}
}
