package host

import (
	"context"
	"fmt"
	"io"

	"github.com/memsh/memsh/sim/replay"
	"go.starlark.net/starlark"
)

// stateKey is the thread-local key of the per-run State.
const stateKey = "memsh.state"

// State is what one run of a script shares across its threads: where output
// goes, whether it may be coloured, how files are read, and the run's
// context. Package lang creates it; builtins read it with StateOf.
type State struct {
	// Out receives print() output and rendered reports.
	Out io.Writer
	// Color says whether Out accepts ANSI colour.
	Color bool
	// Context is cancelled on Ctrl-C; long-running builtins should poll it.
	Context context.Context
	// ReadFile reads name relative to the script file from (a file name as
	// it appears in positions), refusing paths that leave the script's
	// folder tree, files that are not regular files and files larger than
	// limit bytes (what names the kind of file in that error: "config
	// files"). Nil means file access is not available.
	ReadFile func(from, name string, limit int64, what string) ([]byte, error)
	// WriteFile writes data to name relative to the script file from,
	// inside the script's own folder tree, whole or not at all (package
	// lang's write.go). Nil means writing is not available.
	WriteFile func(from, name string, data []byte) error
	// Emit, when set, receives each value the script emits (emit() and
	// main()'s results); nil prints them to Out (PrintEmitted).
	Emit func(thread *starlark.Thread, e Emitted) error
	// Simulated, when set, is called with each report simulate() returns
	// (memsh plot draws the last one when the script emits none).
	Simulated func(r Simulation)
	// Progress, when set, receives progress bars of long sweeps and
	// searches (the CLI sets it to stderr on a terminal); nil draws none.
	Progress io.Writer
}

// Simulation is a report simulate() returned, as the host that runs the
// script sees it (memsh plot draws the last one when the script emits
// none).
type Simulation interface {
	Renderer
	// Title names the plan: "llama-2-7b on A100-80GB: batch 1 x seq 2048, ...".
	Title() string
	// WithTimeline is the report replayed again with its timeline.
	WithTimeline() (*replay.Report, error)
	// WithTrace is the report replayed again with its device trace.
	WithTrace() (*replay.Report, error)
	// SimReport is the engine's report.
	SimReport() *replay.Report
}

// Attach stores s in thread's locals. Call it before execution starts.
func (s *State) Attach(thread *starlark.Thread) { thread.SetLocal(stateKey, s) }

// StateOf returns the State attached to thread. It panics when none is,
// which is a bug in the host (the builtin wrapper reports it as an
// internal error).
func StateOf(thread *starlark.Thread) *State {
	s, ok := thread.Local(stateKey).(*State)
	if !ok || s == nil {
		panic("internal error: memsh state not set")
	}
	return s
}

// ReadScriptFile reads name relative to the file of the Starlark code that
// called the running builtin, inside the script's folder tree: a regular
// file of at most limit bytes, what naming the kind of file for the size
// error.
func ReadScriptFile(thread *starlark.Thread, name string, limit int64, what string) ([]byte, error) {
	st := StateOf(thread)
	if st.ReadFile == nil {
		return nil, fmt.Errorf("cannot read %q: file access is not available here", name)
	}
	return st.ReadFile(CallerPos(thread).Filename(), name, limit, what)
}

// WriteScriptFile writes data to name relative to the file of the Starlark
// code that called the running builtin, inside the script's folder tree.
func WriteScriptFile(thread *starlark.Thread, name string, data []byte) error {
	st := StateOf(thread)
	if st.WriteFile == nil {
		return fmt.Errorf("cannot write %q: file writing is not available here", name)
	}
	return st.WriteFile(CallerPos(thread).Filename(), name, data)
}

// Renderer is a value that prints as a table: reports, and whatever else
// wants print() and the REPL to show it with colour on a terminal.
type Renderer interface {
	Render(w io.Writer, color bool) error
}

// Simulate records r as the run's latest report (State.Simulated).
func (s *State) Simulate(r Simulation) {
	if s.Simulated != nil {
		s.Simulated(r)
	}
}
