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
//   - every=k: one block in every k is checkpointed, counted from one as
//     torchtune's and torchtitan's selective_ac_option=k count: blocks
//     k-1, 2k-1, ... (checkpoint_wrapper._count % k == 0 with _count
//     starting at 1: torchtune 1814feb17 torchtune/training/activations.py,
//     torchtitan 9dec370 torchtitan/parallelisms/parallelize_llama.py);
//     checkpoint(policy="layer", every=k) is the same policy.
//   - op: torchtitan's per-op selective checkpointing; every block is a
//     region whose ops named in Save keep their outputs (checkpoint_policy.go).
//   - modules: layers whose name or kind is listed are regions.
//   - blocks: each repeated block has a policy of its own (Blocks[i]:
//     none, selective, modules or full), what checkpoint(budget=...)
//     resolves to in eager (checkpoint_blocks.go).
//   - budget: the activation memory budget (Budget). Its mechanism follows
//     the stack: in eager the least recompute within the budget, one policy
//     per block, solved when the plan is evaluated (package sim,
//     checkpoint_budget.go); with compile no regions, the partitioner of
//     each compiled graph saving at most the fraction Budget.Fraction of
//     what it would save on its own (torch's activation_memory_budget,
//     torchtitan's MemoryBudgetAC; partition_budget.go), a bytes budget
//     resolved to a fraction when the plan is evaluated.
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
	Mode      string // none | full | selective | every | op | modules | blocks | budget
	Every     int
	Modules   []string
	Save      []string // op policy: the ops whose outputs are kept (SaveOps)
	Selective bool
	Reentrant bool
	// NoEarlyStop: a non-reentrant region's recompute runs its whole
	// forward (torch.utils.checkpoint(early_stop=False), torchtitan's
	// default since its early_stop option; Megatron-LM's and DeepSpeed's
	// own checkpoint functions, which call the forward again whole), not
	// stopping after the last op that saves anything (torch's default).
	// It changes the recompute's FLOPs and time (core/model_flops.go
	// RecomputeEnd); the replay keeps what the region saves either way.
	NoEarlyStop bool
	// InputGrad: the first embedding's output requires grad, as
	// transformers' enable_input_require_grads() makes it (a forward hook
	// calling requires_grad_() on the input embeddings' output; PEFT's
	// prepare_model_for_kbit_training and TRL's SFTTrainer call it with
	// gradient checkpointing, so that a reentrant checkpoint over a frozen
	// embedding records its graph).
	InputGrad bool
	Blocks    []Checkpoint // blocks: the policy of repeated block i (none after the list)
	Budget    Budget       // budget: the activation memory budget (checkpoint_blocks.go)
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
	case "op":
		return Checkpoint{Mode: "op", Save: DefaultSaveOps()}, nil
	}
	return Checkpoint{}, fmt.Errorf("unknown checkpoint %q (known: none, full, selective, op, or checkpoint(every=k, policy=..., modules=[...]))", s)
}

func (c Checkpoint) block(i int) bool {
	switch c.Mode {
	case "full":
		return true
	case "every":
		return c.Every > 0 && (i+1)%c.Every == 0
	case "op":
		return true
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
	if c.InputGrad {
		re += ", input_requires_grad=True"
	}
	if c.NoEarlyStop {
		re += ", early_stop=False"
	}
	switch c.Mode {
	case "every":
		return fmt.Sprintf("checkpoint(every=%d%s)", c.Every, re)
	case "op":
		if !sameOps(c.Save, DefaultSaveOps()) {
			return fmt.Sprintf("checkpoint(policy=\"op\", save=%s%s)", "["+quoteList(c.Save)+"]", re)
		}
		if re != "" {
			return fmt.Sprintf("checkpoint(policy=\"op\"%s)", re)
		}
		return "op"
	case "modules":
		return fmt.Sprintf("checkpoint(modules=%q%s)", c.Modules, re)
	case "", "none":
		if re != "" { // input_requires_grad without checkpointing (Axolotl's adapters)
			return fmt.Sprintf("checkpoint(\"none\"%s)", re)
		}
		return "none"
	case "budget", "blocks":
		return c.budgetString(re)
	}
	if re != "" {
		return fmt.Sprintf("checkpoint(%q%s)", c.Mode, re)
	}
	return c.Mode
}

// Validate checks a policy built in Go (the checkpoint() builtin checks
// its arguments the same way).
func (c Checkpoint) Validate() error {
	switch c.Mode {
	case "", "none", "full", "selective", "modules":
	case "every":
		if c.Every <= 0 {
			return fmt.Errorf("checkpoint: every must be a positive number of blocks (got %d)", c.Every)
		}
	case "budget":
		if err := c.Budget.Validate(); err != nil {
			return err
		}
	case "blocks":
		for i, p := range c.Blocks {
			if p.Mode == "blocks" || p.Mode == "budget" {
				return fmt.Errorf("checkpoint: block %d's policy is %s: a block takes a policy of its own", i, p.Mode)
			}
			if err := p.Validate(); err != nil {
				return err
			}
		}
	case "op":
		if c.Reentrant {
			return fmt.Errorf("checkpoint: policy=\"op\" runs the non-reentrant checkpoint (PyTorch's selective checkpointing needs use_reentrant=False): drop reentrant=True")
		}
		if len(c.Save) == 0 {
			return fmt.Errorf("checkpoint: policy=\"op\" needs a save list (torchtitan's: save=%s)", "["+quoteList(DefaultSaveOps())+"]")
		}
		return CheckSaveOps(c.Save)
	default:
		return fmt.Errorf("unknown checkpoint mode %q (known: none, full, selective, every, op, modules, blocks, budget)", c.Mode)
	}
	if len(c.Save) > 0 {
		return fmt.Errorf("checkpoint: save= is the op policy's list: pass policy=\"op\"")
	}
	return nil
}
