// Package sim is the memsh engine's entry point: Evaluate replays one
// training step of a plan and returns its report; EvaluateSteps replays a
// series of steps (embedding tables whose rows change per step).
//
// Evaluate validates the plan, lowers it (sim/core, with layers from
// sim/nn, sim/graph, sim/hf or sim/litgpt), replays the program through
// the allocator model (sim/replay over sim/alloc), runs the time model
// (sim/timing) and adds a graph model's notes (sim/graph). A pipelined
// plan is replayed stage by stage and the step composed over the stages
// (pipeline.go, over pipeline_run.go's stage replays); EvaluateBelow and
// EvaluateBelowEach (evaluate_each.go: several plans on one pool of
// workers) stop a replay that reaches a limit. The layout search
// (sim/search) sits above it.
//
// The engine is pure Go. No sim package imports go.starlark.net, prints,
// reads the environment or the clock. Errors are *units.Error values that
// the Starlark layer (package builtins) decorates with script positions.
// docs/architecture.md draws the packages and the flow of one plan.
package sim
