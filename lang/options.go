package lang

import "go.starlark.net/syntax"

// DefaultMaxSteps is the step limit of a run unless Options.MaxSteps says
// otherwise: about a second or two of Starlark, far above any real plan
// script and far below a runaway loop.
const DefaultMaxSteps = 100_000_000

// FileOptions returns the Starlark dialect of memsh scripts and stdlib
// modules: top-level for/if and global reassignment (sweeps at top level
// are the common case), sets, no while, no recursion.
func FileOptions() *syntax.FileOptions {
	return &syntax.FileOptions{
		TopLevelControl: true, // for tp in [1, 2, 4, 8]: at top level
		GlobalReassign:  true, // best = None ... best = r inside top-level loops
		Set:             true,
		While:           false, // keep programs obviously terminating
		Recursion:       false,
	}
}

// REPLFileOptions is FileOptions with load() binding globally, so a name
// loaded in one REPL chunk stays visible in the next.
func REPLFileOptions() *syntax.FileOptions {
	o := FileOptions()
	o.LoadBindsGlobally = true
	return o
}
