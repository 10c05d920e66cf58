package core

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// CUDA graphs under torch.compile. mode="reduce-overhead" (and
// "max-autotune", which turns them on too) replays each compiled graph as
// a CUDA graph through Inductor's CUDA graph trees
// (torch/_inductor/cudagraph_trees.py): every graph of the step, forward
// and backward, allocates from ONE private memory pool per device ("CUDA
// graph trees ... share the same memory pool"), which the caching
// allocator keeps apart from its ordinary pools and never hands back to
// them while the graphs live (c10/cuda/CUDACachingAllocator.cpp, Note
// [Checkpointing PrivatePoolState]: "The private pool will not free its
// blocks to the main caching allocator until cuda graph use is
// finished"). A graph's inputs that are neither parameters nor outputs of
// an earlier graph of the tree are copied into placeholders allocated in
// that pool ("we allocate non-static inputs within the same memory pool
// as the CUDAGraph"). The replay (replay/cudagraphs.go) puts every
// allocation of a compiled graph's ops, in the forward, the recompute and
// the backward, in that pool.

// compileModes are torch.compile's modes and whether each replays CUDA
// graphs (torch.compile's docstring: "reduce-overhead" uses CUDA graphs,
// "max-autotune" enables them by default on GPU, "max-autotune-no-cudagraphs"
// does not).
var compileModes = []struct {
	name       string
	cudaGraphs bool
}{
	{"default", false},
	{"reduce-overhead", true},
	{"max-autotune", true},
	{"max-autotune-no-cudagraphs", false},
}

// CompileModes lists torch.compile's modes.
func CompileModes() []string {
	out := make([]string, len(compileModes))
	for i, m := range compileModes {
		out[i] = m.name
	}
	return out
}

// CUDAGraphs reports whether the compiled graphs are replayed as CUDA
// graphs from a private pool.
func (c Compile) CUDAGraphs() bool {
	for _, m := range compileModes {
		if m.name == c.Mode {
			return m.cudaGraphs && c.On()
		}
	}
	return false
}

// validateCompileMode checks compile_mode: a known mode, and CUDA graphs
// only where the replay models them (one GPU, the steady state of a step
// of one micro-batch, nothing offloaded).
func (p *Plan) validateCompileMode() error {
	known := p.Compile.Mode == ""
	for _, m := range compileModes {
		known = known || m.name == p.Compile.Mode
	}
	if !known {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("unknown compile_mode %q (known: %s)", p.Compile.Mode, strings.Join(CompileModes(), ", "))}
	}
	uses := false
	for _, m := range compileModes {
		uses = uses || (m.name == p.Compile.Mode && m.cudaGraphs)
	}
	if !uses {
		return nil
	}
	if !p.Compile.On() {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("compile_mode=%q replays compiled graphs as CUDA graphs, and compile=False compiles nothing", p.Compile.Mode),
			Hint: `pass compile=True (or "blocks", "loss")`}
	}
	what := ""
	switch {
	case p.Parallel.Active():
		what = "a parallel= layout"
	case p.Offload != nil:
		what = "offload="
	case p.GradAccum > 1:
		what = "grad_accum > 1 (the gradients of one micro-batch, outputs of the backward graphs, would live in the pool while the next replays)"
	case p.FirstStep:
		what = "first_step=True (the first runs warm up before any graph is recorded)"
	case p.Validation:
		what = "validation=True"
	}
	if what != "" {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("compile_mode=%q: CUDA graphs are modelled on one GPU, for the steady state of a step of one micro-batch, not with %s", p.Compile.Mode, what),
			Hint: `drop compile_mode, or use "default" or "max-autotune-no-cudagraphs"`}
	}
	return nil
}
