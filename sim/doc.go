// Package sim is the memsh engine: the model IR, dtypes, devices,
// precision policies, optimizers, sharding, the step replay (a timeline of
// tensor allocations and frees), the caching-allocator model, the time
// model and the Report.
//
// sim is pure Go. It must not import go.starlark.net, print anything, read
// the environment or the clock. Errors are *sim.Error values that the
// Starlark layer (package builtins) decorates with script positions.
//
// Not a stable API: it exists for the memsh command.
package sim
