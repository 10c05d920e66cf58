package main

import (
	"context"
	"fmt"
)

// scriptContext limits ctx to --timeout and --max-memory (memory.go) for
// one script (run, test and plot give each script its own limits). When a
// limit is passed the script's thread stops at its next Starlark step
// with a message naming the flag; simulate, sweeps and searches stop
// through the same context.
func (e *env) scriptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, stopMemory := e.memoryContext(ctx)
	if e.timeout <= 0 {
		return ctx, stopMemory
	}
	ctx, cancel := context.WithTimeoutCause(ctx, e.timeout,
		fmt.Errorf("execution exceeded the time limit of %s (use --timeout to raise)", e.timeout))
	return ctx, func() {
		cancel()
		stopMemory()
	}
}

// checkTimeout rejects a negative --timeout.
func (e *env) checkTimeout() error {
	if e.timeout < 0 {
		return usagef("invalid --timeout value %s (want a duration such as 30s or 5m; 0 means none)", e.timeout)
	}
	return nil
}
