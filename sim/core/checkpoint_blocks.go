package core

import (
	"fmt"
	"strings"
)

// Per-block checkpointing and its budget. checkpoint(budget=...) asks for
// the least recompute time whose memory stays within a budget, as
// PyTorch's SAC ILP (torch.distributed._tools.sac_ilp) and the
// partitioner's activation_memory_budget (torch/_functorch/config.py) do;
// the solver (package sim) answers it with one policy per repeated block,
// the "blocks" mode, which the lowering applies block by block.

// Budget is a checkpointing memory budget: a fraction of the activations
// saved for backward, or bytes of device memory.
//
//   - Fraction f in [0, 1], PyTorch's activation_memory_budget: 0 is the
//     saved activations with every block checkpointed, 1 with none, f the
//     linear mix; the blocks keep at most that much.
//   - Bytes: the step's device memory (what nvidia-smi shows) may not
//     exceed it.
type Budget struct {
	Fraction float64
	Bytes    int64
}

// IsZero says whether no budget is set.
func (b Budget) IsZero() bool { return b == Budget{} }

// String is the budget as checkpoint(budget=...) takes it: the fraction,
// or the bytes in whole GiB or MiB where they divide (70 * GiB).
func (b Budget) String() string {
	switch {
	case b.Bytes > 0 && b.Bytes%(1<<30) == 0:
		return fmt.Sprintf("%d * GiB", b.Bytes>>30)
	case b.Bytes > 0 && b.Bytes%(1<<20) == 0:
		return fmt.Sprintf("%d * MiB", b.Bytes>>20)
	case b.Bytes > 0:
		return fmt.Sprintf("%d", b.Bytes)
	}
	return fmt.Sprintf("%g", b.Fraction)
}

// Validate checks a budget.
func (b Budget) Validate() error {
	switch {
	case b.Bytes < 0 || (b.Bytes > 0 && b.Fraction != 0):
		return fmt.Errorf("checkpoint budget: bytes must be positive (got %d), and not given with a fraction", b.Bytes)
	case b.Bytes == 0 && !(b.Fraction >= 0 && b.Fraction <= 1): // NaN too (checkpoint(budget=float("nan")) chose full checkpointing)
		return fmt.Errorf("checkpoint budget: a fraction must be in [0, 1] (got %g): 0 checkpoints every block, 1 none", b.Fraction)
	}
	return nil
}

// BlockPolicy is the policy inside repeated block i: with per-block
// policies, block i's own (none after the list); otherwise c itself.
func (c Checkpoint) BlockPolicy(i int) Checkpoint {
	if c.Mode != "blocks" {
		return c
	}
	if i < 0 || i >= len(c.Blocks) {
		return Checkpoint{Mode: "none"}
	}
	p := c.Blocks[i]
	p.Reentrant, p.NoEarlyStop = c.Reentrant, c.NoEarlyStop
	return p
}

// budgetString is the budget or per-block policy as the user reads it:
// checkpoint(budget=0.5), or the blocks it was solved to, counted by
// policy in order of first appearance.
func (c Checkpoint) budgetString(flags string) string {
	if c.Mode == "budget" {
		return fmt.Sprintf("checkpoint(budget=%s%s)", c.Budget, flags)
	}
	var order []string
	count := map[string]int{}
	for _, b := range c.Blocks {
		s := b.String()
		if b.Mode == "modules" {
			s = strings.Join(b.Modules, "+")
		}
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d %s", count[s], s)
	}
	return "checkpoint(blocks: " + strings.Join(parts, ", ") + flags + ")"
}

// outerBlock is what enterBlock replaced, for leaveBlock to restore.
type outerBlock struct {
	ckpt Checkpoint
	cur  int32
}

// enterBlock lowers what follows as repeated block i (0-based): its ops
// carry the block's number and the plan's policy gives way to the
// block's own, until leaveBlock.
func (b *Builder) enterBlock(i int) outerBlock {
	out := outerBlock{b.Ckpt, b.curBlock}
	b.Ckpt, b.curBlock = b.Ckpt.BlockPolicy(i), int32(i)+1
	return out
}

// InBlock says whether a repeated block is being lowered.
func (b *Builder) InBlock() bool { return b.curBlock > 0 }

// leaveBlock ends the block enterBlock entered.
func (b *Builder) leaveBlock(o outerBlock) { b.Ckpt, b.curBlock = o.ckpt, o.cur }
