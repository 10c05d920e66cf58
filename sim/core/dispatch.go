package core

import (
	"fmt"
	"math"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Overheads is how the step's kernels are launched, what the step costs
// outside the GPU's work and how unevenly experts are loaded; the time model (sim/timing/dispatch.go)
// reads them, the memory replay does not.
type Overheads struct {
	// Dispatch: "eager" (PyTorch runs each op as its own kernel, launched
	// from Python), "fused" (hand-fused kernels, as Megatron-LM with
	// Transformer Engine or Liger run: each chain of elementwise ops is one
	// kernel), "compiled" (torch.compile: Inductor fuses elementwise
	// chains and launches from generated code), "cuda_graphs" (compiled
	// and replayed as CUDA graphs: no CPU cost per kernel). "" is "fused"
	// for precision "megatron" and "eager" otherwise.
	Dispatch string
	// StepSeconds is what each step spends outside the GPU's work: the data
	// loader, the Python training loop, logging. 0 unless set.
	StepSeconds float64
	// ExpertImbalance is the routed tokens of the busiest expert-parallel
	// rank over the mean (1, or 0: balanced, as the memory replay routes
	// them). With expert parallelism every rank waits for the busiest at
	// the all-to-all, so its expert GEMMs and its all-to-all take this
	// factor longer.
	ExpertImbalance float64
}

// DispatchModes lists the dispatch modes.
func DispatchModes() []string { return []string{"eager", "fused", "compiled", "cuda_graphs"} }

// Validate checks the dispatch mode, the step overhead and the expert
// imbalance.
func (o Overheads) Validate() error {
	known := false
	for _, m := range DispatchModes() {
		known = known || o.Dispatch == m
	}
	if o.Dispatch != "" && !known {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("unknown dispatch %q (known: %s)", o.Dispatch, strings.Join(DispatchModes(), ", "))}
	}
	if !(o.StepSeconds >= 0) || math.IsInf(o.StepSeconds, 0) {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("step_overhead must be a number of seconds >= 0 (got %g)", o.StepSeconds)}
	}
	if o.ExpertImbalance != 0 && !(o.ExpertImbalance >= 1) || math.IsInf(o.ExpertImbalance, 0) {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("expert_imbalance must be >= 1: the busiest rank's routed tokens over the mean (got %g)", o.ExpertImbalance),
			Hint: "1 is balanced routing"}
	}
	return nil
}

// Imbalance is ExpertImbalance, 1 when unset.
func (o Overheads) Imbalance() float64 { return max(o.ExpertImbalance, 1) }
