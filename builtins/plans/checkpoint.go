package plans

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
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
// checkpoint(modules=["attention"]) or checkpoint("full", reentrant=True).
func (x Checkpoint) String() string {
	switch {
	case x.c.Mode == "every", x.c.Mode == "modules", x.c.Mode == "budget", x.c.Reentrant:
		return x.c.String()
	}
	return fmt.Sprintf("checkpoint(%q)", x.c.String())
}

func (x Checkpoint) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	eq := x.String() == y.(Checkpoint).String()
	switch op {
	case syntax.EQL:
		return eq, nil
	case syntax.NEQ:
		return !eq, nil
	}
	return false, fmt.Errorf("%s not supported for checkpoint policies", op)
}

var checkpointAttrNames = []string{"budget", "every", "mode", "modules", "reentrant"}

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
	case "budget":
		switch b := x.c.Budget; {
		case x.c.Mode != "budget":
			return starlark.None, nil
		case b.Bytes > 0:
			return starlark.MakeInt64(b.Bytes), nil
		default:
			return starlark.Float(b.Fraction), nil
		}
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

// Unpack accepts a checkpoint value or "none", "full", "selective" (None
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
	}
	return fmt.Errorf("got %s, want \"none\", \"full\", \"selective\" or checkpoint(...)", v.Type())
}

func CheckpointBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "checkpoint",
		Sig:  "checkpoint(mode=None, every=None, modules=None, budget=None, reentrant=False)",
		Doc: "An activation-checkpointing policy for train(checkpoint=...). A checkpointed region keeps only its " +
			"inputs in forward and re-runs its forward in backward, so its whole saved set comes back at once. " +
			"mode is \"none\", \"full\" (every block of every repeat()) or \"selective\" (the attention core only, " +
			"Megatron's --recompute-granularity selective); train() also takes these strings directly. " +
			"every=k checkpoints one block in every k, starting with the first; modules=[...] checkpoints " +
			"each layer whose name or kind is listed (\"attention\", \"mlp\", \"decoder\"). " +
			"checkpoint() alone is \"full\". reentrant picks torch.utils.checkpoint's variant; the default is " +
			"False (use_reentrant=False, what PyTorch recommends; note that PyTorch itself still runs the reentrant " +
			"variant when use_reentrant is not passed, and Hugging Face's gradient_checkpointing_enable() asks for " +
			"it). Both keep the region's inputs in forward. Non-reentrant stops recomputing after the last op that " +
			"saves a tensor; reentrant recomputes the whole region, keeps its outputs until the region's backward " +
			"ends, and a region none of whose inputs requires grad (the first block after a frozen embedding, as " +
			"with LoRA) records no graph: its parameters get no gradient. The strings \"full\" and " +
			"\"selective\" are non-reentrant. " +
			"budget= asks for the least recompute within a memory budget, as PyTorch's SAC ILP and " +
			"activation_memory_budget do: each repeated block gets none, selective, its attention, its MLP or all of it " +
			"checkpointed, chosen on the exact Pareto front of what the blocks keep for backward against their " +
			"recompute time (both read off the lowered step). A float in [0, 1] is a fraction of the saved " +
			"activations (0: as with every block checkpointed, 1: as with none, PyTorch's activation_memory_budget); " +
			"an int is bytes of device memory the step may use (70 * GiB), met by the cheapest choice whose replay " +
			"fits. The report's notes say what was chosen; not for pipeline stages.",
		Fn: checkpointFn,
	}}
}

func checkpointFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var mode, every, modules, budget starlark.Value
	reentrant := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "mode?", &mode, "every?", &every, "modules?", &modules, "budget?", &budget, "reentrant?", &reentrant); err != nil {
		return nil, err
	}
	var c Checkpoint
	var err error
	if budget != nil && budget != starlark.None {
		if c, err = budgetPolicy(budget, mode, every, modules); err != nil {
			return nil, err
		}
	} else if c, err = checkpointPolicy(mode, every, modules); err != nil {
		return nil, err
	}
	if reentrant && c.c.Mode == "none" {
		return nil, fmt.Errorf("reentrant=True needs a checkpointing mode (got \"none\")")
	}
	c.c.Reentrant = reentrant
	return c, nil
}

// checkpointPolicy reads the one of mode, every and modules that is given.
func checkpointPolicy(mode, every, modules starlark.Value) (Checkpoint, error) {
	given := func(v starlark.Value) bool { return v != nil && v != starlark.None }
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
		k, err := host.AsInt64(every, "every")
		if err != nil {
			return Checkpoint{}, err
		}
		if k <= 0 || k > 1<<30 {
			return Checkpoint{}, fmt.Errorf("every must be a positive number of blocks (got %d)", k)
		}
		return Checkpoint{core.Checkpoint{Mode: "every", Every: int(k)}}, nil
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

// budgetPolicy reads budget=: a fraction in [0, 1] or bytes, alone.
func budgetPolicy(budget, mode, every, modules starlark.Value) (Checkpoint, error) {
	for _, v := range []starlark.Value{mode, every, modules} {
		if v != nil && v != starlark.None {
			return Checkpoint{}, fmt.Errorf("checkpoint takes budget= alone: the solver chooses the policy of each block (got mode, every or modules too)")
		}
	}
	var b core.Budget
	switch x := budget.(type) {
	case starlark.Float:
		b.Fraction = float64(x)
	case starlark.Int:
		n, ok := x.Int64()
		if !ok || n <= 0 {
			return Checkpoint{}, host.WithHint(fmt.Errorf("checkpoint: budget bytes must be positive (got %s)", x),
				"an int is bytes of device memory (70 * GiB); a float in [0, 1] a fraction of the saved activations")
		}
		b.Bytes = n
	default:
		return Checkpoint{}, fmt.Errorf("checkpoint: budget must be a fraction in [0, 1] or bytes (got %s)", budget.Type())
	}
	if err := b.Validate(); err != nil {
		return Checkpoint{}, host.WithHint(err, "an int is bytes of device memory (70 * GiB); a float in [0, 1] a fraction of the saved activations")
	}
	return Checkpoint{core.Checkpoint{Mode: "budget", Budget: b}}, nil
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
