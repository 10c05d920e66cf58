package core

import "fmt"

// Checkpoint is an activation-checkpointing policy. A checkpointed region
// keeps only its inputs in forward and re-runs its forward inside backward,
// so its whole saved set comes back at once.
//
//   - none: nothing is recomputed.
//   - full: every repeated block (each copy inside repeat()) is a region.
//   - selective: the attention core (QK^T, softmax, dropout, PV) of each
//     attention is a region (Korthikanti et al. 2022, Megatron
//     --recompute-granularity selective).
//   - every=k: one block in every k is checkpointed (torchtune's
//     selective "ac_option" integer), starting with the first.
//   - modules: layers whose name or kind is listed are regions.
//   - blocks: each repeated block has a policy of its own (Blocks[i]:
//     none, selective, modules or full), what checkpoint(budget=...)
//     resolves to (checkpoint_blocks.go).
//   - budget: the least recompute within a memory budget, solved when the
//     plan is evaluated (package sim, checkpoint_budget.go).
//
// Reentrant picks torch.utils.checkpoint's variant (both keep the region's
// tensor inputs in forward). Non-reentrant (use_reentrant=False, the
// default here and PyTorch's recommendation) stops its recomputation after
// the last op that saves anything. Reentrant (use_reentrant=True, what
// PyTorch still runs when the argument is left out) runs the forward under
// no_grad, recomputes the whole region and keeps its outputs until the
// region's backward is done; a region none of whose inputs requires grad
// records no graph at all, so its parameters get no gradient (PyTorch's
// checkpoint docs: "At least one input and output must have
// requires_grad=True for the reentrant variant").
type Checkpoint struct {
	Mode      string // none | full | selective | every | modules | blocks | budget
	Every     int
	Modules   []string
	Selective bool
	Reentrant bool
	Blocks    []Checkpoint // blocks: the policy of repeated block i (none after the list)
	Budget    Budget       // budget: what the solver must fit
}

// ParseCheckpoint reads the string forms.
func ParseCheckpoint(s string) (Checkpoint, error) {
	switch s {
	case "", "none":
		return Checkpoint{Mode: "none"}, nil
	case "full":
		return Checkpoint{Mode: "full", Every: 1}, nil
	case "selective":
		return Checkpoint{Mode: "selective", Selective: true}, nil
	}
	return Checkpoint{}, fmt.Errorf("unknown checkpoint %q (known: none, full, selective, or checkpoint(every=k, modules=[...]))", s)
}

func (c Checkpoint) block(i int) bool {
	switch c.Mode {
	case "full":
		return true
	case "every":
		return c.Every > 0 && i%c.Every == 0
	}
	return false
}

func (c Checkpoint) matches(l Layer) bool {
	if c.Mode != "modules" {
		return false
	}
	for _, m := range c.Modules {
		if m == l.Kind() || (l.Label() != "" && m == l.Label()) {
			return true
		}
	}
	return false
}

// String is the user-facing form.
func (c Checkpoint) String() string {
	re := ""
	if c.Reentrant {
		re = ", reentrant=True"
	}
	switch c.Mode {
	case "every":
		return fmt.Sprintf("checkpoint(every=%d%s)", c.Every, re)
	case "modules":
		return fmt.Sprintf("checkpoint(modules=%q%s)", c.Modules, re)
	case "", "none":
		return "none"
	case "budget", "blocks":
		return c.budgetString()
	}
	if c.Reentrant {
		return fmt.Sprintf("checkpoint(%q%s)", c.Mode, re)
	}
	return c.Mode
}
