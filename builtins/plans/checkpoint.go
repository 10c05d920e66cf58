package plans

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Checkpoint is the Starlark value of an activation-checkpointing policy
// (type "checkpoint").
type Checkpoint struct{ c core.Checkpoint }

var (
	_ starlark.HasAttrs   = Checkpoint{}
	_ starlark.Comparable = Checkpoint{}
	_ starlark.Unpacker   = (*Checkpoint)(nil)
)

// SimCheckpoint is the wrapped policy.
func (x Checkpoint) SimCheckpoint() core.Checkpoint { return x.c }

func (x Checkpoint) Type() string         { return "checkpoint" }
func (x Checkpoint) Freeze()              {}
func (x Checkpoint) Truth() starlark.Bool { return starlark.Bool(x.c.Mode != "none") }
func (x Checkpoint) Hash() (uint32, error) {
	return starlark.String(x.String()).Hash()
}

// String is checkpoint("full"), checkpoint(every=2),
// checkpoint(modules=["attention"]) or checkpoint("full", reentrant=True):
// the policy's own form (core.Checkpoint.String) when it is a call, else
// its mode quoted. Equality and hashing compare it, so it names every
// field that changes the replay.
func (x Checkpoint) String() string {
	if s := x.c.String(); strings.HasPrefix(s, "checkpoint(") {
		return s
	}
	return fmt.Sprintf("checkpoint(%q)", x.c.String())
}

func (x Checkpoint) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	return compareEqual(op, x.String() == y.(Checkpoint).String(), "checkpoint policies")
}

var checkpointAttrNames = []string{"budget", "early_stop", "every", "input_requires_grad", "mode", "modules", "policy", "reentrant", "save"}

func (x Checkpoint) AttrNames() []string { return checkpointAttrNames }

func (x Checkpoint) Attr(name string) (starlark.Value, error) {
	switch name {
	case "mode":
		if x.c.Mode == "" {
			return starlark.String("none"), nil
		}
		return starlark.String(x.c.Mode), nil
	case "reentrant":
		return starlark.Bool(x.c.Reentrant), nil
	case "early_stop":
		return starlark.Bool(!x.c.NoEarlyStop), nil
	case "input_requires_grad":
		return starlark.Bool(x.c.InputGrad), nil
	case "budget":
		switch b := x.c.Budget; {
		case x.c.Mode != "budget":
			return starlark.None, nil
		case b.Bytes > 0:
			return starlark.MakeInt64(b.Bytes), nil
		default:
			return starlark.Float(b.Fraction), nil
		}
	case "policy":
		if x.c.Mode != "op" {
			return starlark.None, nil
		}
		return starlark.String(x.c.Mode), nil
	case "save":
		if x.c.Mode != "op" {
			return starlark.None, nil
		}
		out := make(starlark.Tuple, len(x.c.Save))
		for i, m := range x.c.Save {
			out[i] = starlark.String(m)
		}
		return out, nil
	case "every":
		if x.c.Every == 0 {
			return starlark.None, nil
		}
		return starlark.MakeInt(x.c.Every), nil
	case "modules":
		if x.c.Mode != "modules" {
			return starlark.None, nil
		}
		out := make(starlark.Tuple, len(x.c.Modules))
		for i, m := range x.c.Modules {
			out[i] = starlark.String(m)
		}
		return out, nil
	}
	return nil, nil
}

// Unpack accepts a checkpoint value or "none", "full", "selective", "op" (None
// and False mean none).
func (x *Checkpoint) Unpack(v starlark.Value) error {
	switch v := v.(type) {
	case Checkpoint:
		*x = v
		return nil
	case starlark.String:
		c, err := core.ParseCheckpoint(string(v))
		if err != nil {
			return err
		}
		*x = Checkpoint{c}
		return nil
	case starlark.NoneType:
		*x = Checkpoint{core.Checkpoint{Mode: "none"}}
		return nil
	case starlark.Bool:
		if !v {
			*x = Checkpoint{core.Checkpoint{Mode: "none"}}
			return nil
		}
		return &units.Error{Msg: `got True, want "none", "full", "selective", "op" or checkpoint(...)`,
			Hint: `checkpoint="full" checkpoints every block, as gradient_checkpointing=True does`}
	}
	return fmt.Errorf("got %s, want \"none\", \"full\", \"selective\", \"op\" or checkpoint(...)", v.Type())
}

func CheckpointBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "checkpoint",
		Sig:  "checkpoint(mode=None, every=None, modules=None, budget=None, reentrant=False, policy=None, save=None, input_requires_grad=False, early_stop=True)",
		Doc: "An activation-checkpointing policy for train(checkpoint=...). A checkpointed region keeps only its " +
			"inputs in forward and re-runs its forward in backward, so its whole saved set comes back at once. " +
			"mode is \"none\", \"full\" (every block of every repeat()) or \"selective\" (the attention core only, " +
			"Megatron's --recompute-granularity selective); train() also takes these strings directly, and \"op\". " +
			"every=k checkpoints one block in every k, counted from one as torchtune's and torchtitan's " +
			"selective_ac_option=k count (blocks k-1, 2k-1, ...); policy=\"layer\" with every=k is the same. " +
			"modules=[...] checkpoints each layer whose name or kind is listed (\"attention\", \"mlp\", \"decoder\"); a name that is no layer's kind or name is an error. " +
			"On an anemoi graph model it wraps modules by path (\"encoder\", \"decoder\", \"decoder.proc\", " +
			"\"decoder.proc.conv\": the attention, \"processor\"), nested in anemoi's own checkpoints: the enclosing " +
			"recompute keeps only the wrapped module's inputs and its backward runs it once more. " +
			"policy=\"op\" is torchtitan's per-op selective checkpointing " +
			"(selective_ac_option=\"op\"): every block is checkpointed, but the ops named in save keep their outputs " +
			"from the forward and are not run again; every second linear matmul (\"mm\") of a block is recomputed " +
			"all the same. save defaults to torchtitan's list at 9dec370, [\"mm\", \"attention\", \"reduce_scatter\", \"abs\", \"max\"] (abs and max only matter with float8=; torchtitan later dropped abs); the names " +
			"are " + saveOpsDoc() + ". " +
			"budget=b is the activation memory budget, alone: a float in [0, 1] is a fraction of the activations saved " +
			"for backward (PyTorch's activation_memory_budget: 0 recomputes all it can, 1 nothing more than the stack " +
			"does on its own), an int bytes of device memory the step may use (70 * GiB), met by the least recompute " +
			"whose replay fits. The mechanism follows the stack, as in PyTorch. In eager (no train(compile=...)) it is " +
			"PyTorch's SAC ILP: each repeated block gets none, selective, its attention, its MLP or all of it " +
			"checkpointed, chosen on the exact Pareto front of what the blocks keep for backward against their " +
			"recompute time (both read off the lowered step); 0 is every block checkpointed, 1 none. With " +
			"train(compile=...) no block is wrapped: it is torch.compile's activation_memory_budget " +
			"(torch._functorch.config, torchtitan's MemoryBudgetAC), each compiled graph saving at most the fraction " +
			"of what its partitioner saves on its own, beyond its inputs, giving up the values cheapest to recompute " +
			"first (a knapsack over their FLOPs); 0 saves only the inputs, 1 is compile's default; bytes are met by " +
			"the fastest of the fractions 0, 0.05, ..., 1 whose replay fits (the step's memory is not monotone in the " +
			"fraction, so each is replayed). The report's notes say what was chosen; eager budgets are not for " +
			"pipeline stages. " +
			"checkpoint() alone is \"full\". reentrant picks torch.utils.checkpoint's variant; the default is " +
			"False (use_reentrant=False, what PyTorch recommends; note that PyTorch itself still runs the reentrant " +
			"variant when use_reentrant is not passed, and Hugging Face's gradient_checkpointing_enable() asks for " +
			"it). Both keep the region's inputs in forward. Non-reentrant stops recomputing after the last op that " +
			"saves a tensor (torch.utils.checkpoint's early_stop, its default since torch 2.1: the last such op's kernel " +
			"runs again only if it saves one of its own outputs, so a Llama block's down_proj GEMM is not recomputed); " +
			"early_stop=False recomputes the whole region's forward, as torch before 2.1, torchtitan's " +
			"activation_checkpoint.early_stop (False by default) and Megatron-LM's and DeepSpeed's own checkpoint " +
			"functions do (the recompute's time and FLOPs; what the region keeps is the same). Reentrant recomputes the whole region, keeps its outputs until the region's backward " +
			"ends, and a region none of whose inputs requires grad (the first block after a frozen embedding, as " +
			"with LoRA) records no graph: its parameters get no gradient. A non-reentrant region records no graph " +
			"when nothing inside requires grad (no input does and no parameter inside trains: the first block's " +
			"attention under LoRA on the MLP only), and then keeps no input either. policy=\"op\" is " +
			"non-reentrant only. The strings \"full\", \"selective\" and \"op\" are non-reentrant. " +
			"input_requires_grad=True makes the output of the model's first embedding require grad, as " +
			"transformers' enable_input_require_grads() does (PEFT and TRL call it with gradient checkpointing, so " +
			"that a reentrant checkpoint over a frozen embedding records its graph; Axolotl calls it for every adapter, checkpointed or " +
			"not: checkpoint(\"none\", input_requires_grad=True)). Under fsdp=1 a reentrant " +
			"checkpoint around a unit with no trainable parameter (a frozen base layer whose adapters are wrapped " +
			"on their own, as with QLoRA) keeps each recomputed layer's input and its gradient until the backward " +
			"ends: FSDP's reshard-only hook holds them (docs/sharding.md).",
		Fn: checkpointFn,
	}}
}

// saveOpsDoc lists the names a save list may use, with what each is.
func saveOpsDoc() string {
	parts := make([]string, len(core.SaveOps))
	for i, s := range core.SaveOps {
		parts[i] = fmt.Sprintf("%q (%s)", s.Name, s.Doc)
	}
	return strings.Join(parts, ", ")
}

func checkpointFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var mode, every, modules, policy, save, budget starlark.Value
	reentrant, inputGrad, earlyStop := false, false, true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "mode?", &mode, "every?", &every, "modules?", &modules,
		"budget?", &budget, "reentrant?", &reentrant, "policy?", &policy, "save?", &save,
		"input_requires_grad?", &inputGrad, "early_stop?", &earlyStop); err != nil {
		return nil, err
	}
	var c Checkpoint
	var err error
	if given(budget) {
		c, err = checkpointBudget(budget, given(mode) || given(every) || given(modules) || given(policy) || given(save))
	} else {
		c, err = checkpointPolicy(mode, every, modules, policy, save)
	}
	if err != nil {
		return nil, err
	}
	if reentrant && c.c.Mode == "none" {
		return nil, fmt.Errorf("reentrant=True needs a checkpointing mode (got \"none\")")
	}
	if !earlyStop && (reentrant || c.c.Mode == "none") {
		return nil, fmt.Errorf("early_stop=False is for non-reentrant checkpointing: a reentrant region recomputes whole already, and mode \"none\" recomputes nothing (got reentrant=%t, mode %q)", reentrant, c.c.String())
	}
	c.c.Reentrant = reentrant
	c.c.InputGrad = inputGrad
	c.c.NoEarlyStop = !earlyStop
	if err := c.c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func given(v starlark.Value) bool { return v != nil && v != starlark.None }

// checkpointPolicy reads the one of mode, every, modules and policy that
// is given (policy="layer" takes every, policy="op" save).
func checkpointPolicy(mode, every, modules, policy, save starlark.Value) (Checkpoint, error) {
	if given(policy) {
		return checkpointByPolicy(policy, every, save, given(mode) || given(modules))
	}
	if given(save) {
		return Checkpoint{}, fmt.Errorf("save= lists the ops the op policy keeps: pass policy=\"op\" with it")
	}
	n := 0
	for _, v := range []starlark.Value{mode, every, modules} {
		if given(v) {
			n++
		}
	}
	if n > 1 {
		return Checkpoint{}, fmt.Errorf("checkpoint takes one of mode, every or modules (got %d)", n)
	}
	switch {
	case given(every):
		k, err := blocksEvery(every)
		if err != nil {
			return Checkpoint{}, err
		}
		return Checkpoint{core.Checkpoint{Mode: "every", Every: k}}, nil
	case given(modules):
		names, err := stringList(modules, "modules")
		if err != nil {
			return Checkpoint{}, err
		}
		if len(names) == 0 {
			return Checkpoint{}, fmt.Errorf("modules must name at least one layer name or kind")
		}
		return Checkpoint{core.Checkpoint{Mode: "modules", Modules: names}}, nil
	case given(mode):
		var c Checkpoint
		err := c.Unpack(mode)
		return c, err
	}
	return Checkpoint{core.Checkpoint{Mode: "full", Every: 1}}, nil
}

// checkpointByPolicy reads policy="op" (with save) or policy="layer" (with every).
func checkpointByPolicy(policy, every, save starlark.Value, other bool) (Checkpoint, error) {
	p, ok := policy.(starlark.String)
	if !ok {
		return Checkpoint{}, fmt.Errorf("policy must be \"op\" or \"layer\" (got %s)", policy.Type())
	}
	if other {
		return Checkpoint{}, fmt.Errorf("checkpoint takes policy= or one of mode and modules, not both")
	}
	switch string(p) {
	case "op":
		if given(every) {
			return Checkpoint{}, fmt.Errorf("policy=\"op\" checkpoints every block: every= is policy=\"layer\"'s")
		}
		names := core.DefaultSaveOps()
		if given(save) {
			var err error
			if names, err = stringList(save, "save"); err != nil {
				return Checkpoint{}, err
			}
		}
		if err := core.CheckSaveOps(names); err != nil {
			return Checkpoint{}, saveOpsError(names, err)
		}
		return Checkpoint{core.Checkpoint{Mode: "op", Save: names}}, nil
	case "layer":
		if given(save) {
			return Checkpoint{}, fmt.Errorf("save= lists the ops policy=\"op\" keeps; policy=\"layer\" takes every=k")
		}
		if !given(every) {
			return Checkpoint{}, fmt.Errorf("policy=\"layer\" needs every=k (checkpoint one block in every k)")
		}
		k, err := blocksEvery(every)
		if err != nil {
			return Checkpoint{}, err
		}
		return Checkpoint{core.Checkpoint{Mode: "every", Every: k}}, nil // the same policy as every=k
	}
	return Checkpoint{}, fmt.Errorf("unknown checkpoint policy %q (known: op, layer)", string(p))
}

// budgetHint says what budget= takes.
const budgetHint = "a float in [0, 1] is a fraction of the saved activations (0: recompute all, 1: none); an int is bytes of device memory (70 * GiB)"

// checkpointBudget reads budget=: a fraction in [0, 1] or bytes, alone.
func checkpointBudget(budget starlark.Value, other bool) (Checkpoint, error) {
	if other {
		return Checkpoint{}, fmt.Errorf("checkpoint takes budget= alone: the budget chooses what is recomputed (got mode, every, modules, policy or save too)")
	}
	var b core.Budget
	switch x := budget.(type) {
	case starlark.Float:
		b.Fraction = float64(x)
	case starlark.Int:
		n, ok := x.Int64()
		if !ok || n <= 0 {
			return Checkpoint{}, host.WithHint(fmt.Errorf("checkpoint: budget bytes must be positive (got %s)", x), budgetHint)
		}
		b.Bytes = n
	default:
		return Checkpoint{}, fmt.Errorf("checkpoint: budget must be a fraction in [0, 1] or bytes (got %s)", budget.Type())
	}
	if err := b.Validate(); err != nil {
		return Checkpoint{}, host.WithHint(err, budgetHint)
	}
	return Checkpoint{core.Checkpoint{Mode: "budget", Budget: b}}, nil
}

// blocksEvery reads every=k.
func blocksEvery(every starlark.Value) (int, error) {
	k, err := host.AsInt64(every, "every")
	if err != nil {
		return 0, err
	}
	if k <= 0 {
		return 0, host.WithHint(fmt.Errorf("checkpoint: every must be a positive number of blocks (got %d)", k),
			"every=k checkpoints one block in every k (every=1 all of them, as \"full\"); checkpoint(mode=\"none\") none")
	}
	if k > 1<<30 {
		return 0, fmt.Errorf("checkpoint: every=%d is more blocks than memsh counts (up to 2^30)", k)
	}
	return int(k), nil
}

// stringList unpacks a string or a list/tuple of strings.
func stringList(v starlark.Value, what string) ([]string, error) {
	if s, ok := v.(starlark.String); ok {
		return []string{string(s)}, nil
	}
	seq, ok := v.(starlark.Indexable)
	if !ok {
		return nil, fmt.Errorf("%s must be a list of strings (got %s)", what, v.Type())
	}
	out := make([]string, seq.Len())
	for i := range out {
		s, ok := seq.Index(i).(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s[%d] must be a string (got %s)", what, i, seq.Index(i).Type())
		}
		out[i] = string(s)
	}
	return out, nil
}
