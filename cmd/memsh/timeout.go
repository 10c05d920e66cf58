package main

import (
	"context"
	"fmt"
)

// scriptContext limits ctx to --timeout for one script (run, test and
// plot give each script its own limit). When the time is up the script's
// thread stops at its next Starlark step with a message naming the flag;
// sweeps and searches stop between plans.
func (e *env) scriptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, e.timeout,
		fmt.Errorf("execution exceeded the time limit of %s (use --timeout to raise)", e.timeout))
}

// checkTimeout rejects a negative --timeout.
func (e *env) checkTimeout() error {
	if e.timeout < 0 {
		return usagef("invalid --timeout value %s (want a duration such as 30s or 5m; 0 means none)", e.timeout)
	}
	return nil
}
