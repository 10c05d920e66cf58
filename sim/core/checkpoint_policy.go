package core

import (
	"fmt"
	"slices"
	"strings"
)

// Per-op selective activation checkpointing (checkpoint(policy="op")), as
// torchtitan applies it to each transformer block: torch.utils.checkpoint
// (use_reentrant=False) with create_selective_checkpoint_contexts and a
// policy that answers MUST_SAVE for the ops of a save list and
// PREFER_RECOMPUTE for every other op, except that every second aten.mm of
// a block is recomputed (torchtitan 9dec370,
// torchtitan/parallelisms/parallelize_llama.py, _save_list and
// _custom_policy; the count restarts in each block).
//
// A kept op's outputs live from the forward until the block's
// recomputation reaches the op, which then hands them on instead of
// running (the selective-checkpoint cache pops them); from there they live
// as any recomputed tensor does. Everything else in the block is
// recomputed, as under full checkpointing. Measured on the CPU with
// torch 2.15 (tools/oracle/sac.py): a Llama block keeps q_proj's, v_proj's,
// gate_proj's and down_proj's outputs (the 1st, 3rd, 5th and 7th mm) and
// the attention kernel's output and logsumexp, besides its input.

// SaveOp is an op a save list may name.
type SaveOp struct {
	Name  string
	Doc   string
	match func(op *OpInfo) bool
}

// SaveOps are the ops a save list may name, declared once: the lowering's
// ops each name stands for.
var SaveOps = []SaveOp{
	{"mm", "a linear layer's matmul (aten.mm); every second one of a block is recomputed, as torchtitan does",
		func(op *OpInfo) bool { return op.Kind == "matmul" && len(op.Params) > 0 }},
	{"bmm", "a matmul of two activations (eager attention's QK^T and PV, aten.bmm)",
		func(op *OpInfo) bool { return op.Kind == "matmul" && len(op.Params) == 0 }},
	{"attention", "a fused attention kernel (SDPA's flash or efficient kernel, flash-attn): its output and logsumexp",
		func(op *OpInfo) bool { return op.Kind == "attention" }},
	{"reduce_scatter", "tensor parallelism's reduce-scatter into the sequence-parallel region",
		func(op *OpInfo) bool { return op.Kind == "reduce_scatter" }},
	{"all_to_all", "expert parallelism's token all-to-all",
		func(op *OpInfo) bool { return op.Kind == "all_to_all" }},
	{"topk", "a MoE router's top-k",
		func(op *OpInfo) bool { return op.Kind == "topk" }},
	{"abs", "a float8 cast's abs (aten.abs): as large as the tensor cast; kept in eager mode, dropped under compile when the backward does not read it",
		func(op *OpInfo) bool { return op.Kind == "abs" }},
	{"max", "a tensorwise float8 cast's amax (aten.max, one scalar)",
		func(op *OpInfo) bool { return op.Kind == "max" }},
}

// DefaultSaveOps is torchtitan's save list (9dec370) in these names:
// aten.mm, SDPA's flash and efficient kernels, the reduce-scatter, and
// aten.abs and aten.max ("for low precision training, it's useful to
// always save the result of max(abs(tensor))"), which only float8 casts
// lower to.
func DefaultSaveOps() []string { return []string{"mm", "attention", "reduce_scatter", "abs", "max"} }

// SaveOpNames lists the names a save list may use.
func SaveOpNames() []string {
	out := make([]string, len(SaveOps))
	for i, s := range SaveOps {
		out[i] = s.Name
	}
	return out
}

// CheckSaveOps checks a save list: known names, each once.
func CheckSaveOps(names []string) error {
	known := func(n string) bool { // SaveOpNames contains n, without listing them (every plan validated checks its list)
		for _, s := range SaveOps {
			if s.Name == n {
				return true
			}
		}
		return false
	}
	for i, n := range names {
		if !known(n) {
			return fmt.Errorf("save: unknown op %q (known: %s)", n, strings.Join(SaveOpNames(), ", "))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("save: %q is listed twice", n)
		}
	}
	return nil
}

// saveOpName is the save-list name of op, "" when it has none.
func saveOpName(op *OpInfo) string {
	for _, s := range SaveOps {
		if s.match(op) {
			return s.Name
		}
	}
	return ""
}

// keepPolicyOutputs marks the ops of region id whose outputs the op policy
// keeps.
func (b *Builder) keepPolicyOutputs(id int32) {
	reg := &b.P.Regions[id-1]
	if reg.NoGrad {
		return
	}
	mm := 0
	for j := reg.First; j < reg.End; j++ {
		op := &b.P.Ops[j]
		name := saveOpName(op)
		if name == "mm" {
			mm++
		}
		if name == "" || !slices.Contains(b.Ckpt.Save, name) || (name == "mm" && mm%2 == 0) {
			continue
		}
		op.Keep = true
	}
}

func sameOps(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
