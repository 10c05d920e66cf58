package plans

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Plan is the Starlark value of a training (or evaluation) step to
// simulate (type "plan"), from train(). Its attributes are train()'s
// arguments as resolved; plan.replace(**changes) derives a variant.
type Plan struct {
	P    *core.Plan
	Args trainArgs
	decl syntax.Position
}

var (
	_ starlark.HasAttrs   = (*Plan)(nil)
	_ starlark.Comparable = (*Plan)(nil)
)

// SimPlan returns the wrapped plan (shared; do not modify it).
func (x *Plan) SimPlan() *core.Plan { return x.P }

// Decl is where the plan was declared (train() or replace()).
func (x *Plan) Decl() syntax.Position { return x.decl }

// Model is the plan's model value.
func (x *Plan) Model() *models.Model { return x.Args.Get("model").(*models.Model) }

func (x *Plan) Type() string         { return "plan" }
func (x *Plan) Freeze()              {}
func (x *Plan) Truth() starlark.Bool { return starlark.True }
func (x *Plan) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: plan")
}

func (x *Plan) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	o := y.(*Plan)
	switch op {
	case syntax.EQL:
		return x == o, nil
	case syntax.NEQ:
		return x != o, nil
	}
	return false, fmt.Errorf("%s not supported for plans", op)
}

func PlanBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "train",
		Sig:  TrainSig(),
		Doc:  TrainDoc(),
		Fn:   trainFn,
	}}
}

func trainFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("train takes the model, then keywords (got %d positional arguments)", len(args))
	}
	a := DefaultTrainArgs()
	if err := a.unpack(b.Name(), args, kwargs, false); err != nil {
		return nil, err
	}
	return NewPlan(a, host.CallerPos(thread))
}

// replace is plan.replace(**changes).
func (x *Plan) replace(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("replace takes keywords only (train() arguments: %s)", strings.Join(TrainArgNames(), ", "))
	}
	a := x.Args.Clone()
	if err := a.unpack(b.Name(), nil, kwargs, true); err != nil {
		return nil, err
	}
	return NewPlan(a, host.CallerPos(thread))
}

// newPlan resolves a's values into a plan, validates it and stores the
// canonical values back.
func NewPlan(a trainArgs, decl syntax.Position) (starlark.Value, error) {
	p, err := a.resolve()
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err // raised by the train() or replace() call itself
	}
	return &Plan{P: p, Args: a, decl: decl}, nil
}

// argError words a train() argument that did not unpack: an unknown name
// keeps the lookup's own message (which says what it is) and gets a
// did-you-mean hint from known; a value of the wrong type is prefixed with
// the argument name.
func argError(what string, v starlark.Value, err error, known []string) error {
	s, ok := v.(starlark.String)
	if !ok {
		var se *units.Error
		if errors.As(err, &se) { // keep its hint
			return host.WithHint(fmt.Errorf("%s: %s", what, se.Msg), se.Hint)
		}
		return fmt.Errorf("%s: %v", what, err)
	}
	return host.WithHint(err, host.DidYouMean(string(s), known))
}

func precisionNames() []string {
	var out []string
	for _, p := range core.Precisions() {
		out = append(out, p.Name)
	}
	return out
}

// planAttrNames lists train()'s arguments and replace, sorted.
var planAttrNames = func() []string {
	names := append([]string{"replace"}, TrainArgNames()...)
	sort.Strings(names)
	return names
}()

func (x *Plan) AttrNames() []string { return planAttrNames }

func (x *Plan) Attr(name string) (starlark.Value, error) {
	if name == "replace" {
		return starlark.NewBuiltin("replace", x.replace).BindReceiver(x), nil
	}
	if name == "preference" && x.P.Preference.GRPO() {
		// The objective with the reference train() resolved (setPreference):
		// its .reference reads it; it still equals the call (CompareSameType).
		return Preference{*x.P.Preference}, nil
	}
	if _, ok := keywordIndex[name]; ok {
		return x.Args.Get(name), nil
	}
	return nil, nil
}

// String is the train() call that builds the plan, with the model by name
// and only the arguments that differ from the defaults (batch, seq and gpu
// always):
//
//	train(model="llama-7b", batch=1, seq=2048, precision="bf16-mixed", gpu="A100-80GB")
func (x *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "train(model=%q", x.P.Model.Name)
	for i, k := range TrainKeywords[1:] {
		v := x.Args.vals[i+1]
		switch {
		case k.Name == "batch" || k.Name == "gpu":
		case k.Name == "seq" && v != starlark.None:
		default:
			if Same(v, k.Def) {
				continue
			}
		}
		fmt.Fprintf(&b, ", %s=%s", k.Name, argRepr(v))
	}
	return b.String() + ")"
}

// argRepr writes named precisions, checkpoints and catalog GPUs as their
// strings, which train() accepts.
func argRepr(v starlark.Value) string {
	switch x := v.(type) {
	case Precision:
		if !x.custom {
			return fmt.Sprintf("%q", x.p.Name)
		}
	case Checkpoint:
		// A named mode is its string; a policy with options
		// (checkpoint("full", reentrant=True)) is its call, not quoted.
		if s := x.c.String(); x.c.Mode != "every" && x.c.Mode != "modules" && x.c.Mode != "budget" && !strings.HasPrefix(s, "checkpoint(") {
			return fmt.Sprintf("%q", s)
		}
	case GPU:
		if s := x.String(); strings.HasPrefix(s, "gpu(\"") {
			return strings.TrimSuffix(strings.TrimPrefix(s, "gpu("), ")")
		}
	}
	return v.String()
}

// same compares canonical and default argument values by their repr.
func Same(v, def starlark.Value) bool {
	return argRepr(v) == argRepr(def) || v.String() == def.String()
}

// Summary is a one-line description of the plan for report titles:
// "batch 1 x seq 2048, bf16-mixed, adamw, checkpoint none".
func (x *Plan) Summary() string {
	p := x.P
	parts := []string{fmt.Sprintf("batch %d", p.Batch)}
	if pr := p.Preference; pr != nil && !pr.KTO() && !pr.GRPO() { // DPO: the batch counts pairs of two rows
		parts[0] = fmt.Sprintf("batch %s (%s)", units.Count(p.Batch, "pair"), units.Count(p.Batch*pr.Rows(), "row"))
	}
	if x.Args.Get("seq") != starlark.None {
		parts[0] += fmt.Sprintf(" x seq %d", p.Seq)
	}
	if p.GradAccum > 1 {
		parts = append(parts, fmt.Sprintf("grad_accum %d", p.GradAccum))
	}
	if p.Members > 1 {
		parts = append(parts, fmt.Sprintf("%d members %s", p.Members, p.MembersMode))
	}
	parts = append(parts, x.Args.Get("precision").(Precision).LabelFor(p), x.Args.Get("optimizer").String())
	switch p.Checkpoint.Mode {
	case "none", "":
		parts = append(parts, "no checkpointing")
	case "every", "modules":
		parts = append(parts, p.Checkpoint.String())
	default:
		parts = append(parts, p.Checkpoint.Mode+" checkpointing")
	}
	if p.LoRA != nil {
		parts = append(parts, fmt.Sprintf("lora r=%d", p.LoRA.Rank))
	}
	if p.Quant != "" {
		parts = append(parts, p.Quant)
	}
	if pr := p.Preference; pr != nil {
		how := "trl " + pr.TRL
		if pr.TRL == "" {
			how = pr.Trainer
		}
		switch {
		case pr.GRPO():
			parts = append(parts, fmt.Sprintf("grpo (completion %d, reference %s, %s)", pr.GRPOConfig.Completion, pr.Reference, how))
		case pr.KTO():
			parts = append(parts, fmt.Sprintf("kto (loss %s, reference %s, %s)", pr.Loss, pr.Reference, how))
		default:
			parts = append(parts, fmt.Sprintf("dpo (reference %s, %s)", pr.Reference, how))
		}
	}
	if p.Phase == core.Eval {
		parts = append(parts, "eval")
	}
	return strings.Join(parts, ", ")
}
