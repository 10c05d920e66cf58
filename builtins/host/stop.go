package host

import (
	"context"
	"errors"
	"fmt"

	"go.starlark.net/starlark"
)

// StopError says why a long builtin (sweep, search) stopped before it was
// done: what plus "interrupted" after Ctrl-C, or the cause the host gave
// when it cancelled the run (memsh run --timeout names its flag there).
// detail follows the verb: " after 3 of 100 plans".
func StopError(ctx context.Context, what, detail string) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return fmt.Errorf("%s interrupted%s", what, detail)
	}
	return fmt.Errorf("%s stopped%s: %v", what, detail, cause)
}

// RunContext is the run's context, which Ctrl-C, --timeout and
// --max-memory cancel: long builtins pass it to the engine
// (sim.Options.Context) and poll it.
func RunContext(thread *starlark.Thread) context.Context {
	if ctx := StateOf(thread).Context; ctx != nil {
		return ctx
	}
	return context.Background()
}

// StoppedBy returns the error of a builtin (what) whose evaluation ctx
// stopped, or nil when err is something else.
func StoppedBy(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return StopError(ctx, what, "")
	}
	return nil
}
