package builtins

import (
	"fmt"
	"sort"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Plan is the Starlark value of a training (or evaluation) step to
// simulate (type "plan"), from train(). Its attributes are train()'s
// arguments as resolved; plan.replace(**changes) derives a variant.
type Plan struct {
	p    *core.Plan
	args trainArgs
	decl syntax.Position
}

var (
	_ starlark.HasAttrs   = (*Plan)(nil)
	_ starlark.Comparable = (*Plan)(nil)
)

// SimPlan returns the wrapped plan (shared; do not modify it).
func (x *Plan) SimPlan() *core.Plan { return x.p }

// Decl is where the plan was declared (train() or replace()).
func (x *Plan) Decl() syntax.Position { return x.decl }

// Model is the plan's model value.
func (x *Plan) Model() *Model { return x.args.vals[argModel].(*Model) }

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

// train() arguments, in signature order.
const (
	argModel = iota
	argBatch
	argSeq
	argGradAccum
	argMembers
	argMembersMode
	argPrecision
	argOptimizer
	argCheckpoint
	argLoRA
	argQuant
	argGPU
	argPhase
	argRuntime
	argParallel
	argOffload
	argCluster
	argFreeze // freeze, loss_chunks, tokens_per_batch, host_memory, quant_lm_head, quant_from
	argLossChunks
	argTokensPerBatch
	argHostMemory
	argQuantLMHead
	argQuantFrom
	argExpandableSegments
	argValidation
	argRollout
	argFirstStep
	numTrainArgs
)

var trainArgNames = [numTrainArgs]string{
	"model", "batch", "seq", "grad_accum", "members", "members_mode", "precision", "optimizer",
	"checkpoint", "lora", "quant", "gpu", "phase", "runtime", "parallel", "offload", "cluster",
	"freeze", "loss_chunks", "tokens_per_batch", "host_memory", "quant_lm_head", "quant_from",
	"expandable_segments", "validation", "rollout", "first_step",
}

// trainArgs holds train()'s arguments, resolved to canonical values
// (ints, a GPU, a Precision, ...) so that replace() can re-run them.
type trainArgs struct {
	vals [numTrainArgs]starlark.Value
}

func defaultTrainArgs() trainArgs {
	var a trainArgs
	a.vals = [numTrainArgs]starlark.Value{
		argBatch: starlark.MakeInt(1), argSeq: starlark.None, argGradAccum: starlark.MakeInt(1),
		argMembers: starlark.MakeInt(1), argMembersMode: starlark.String("stacked"),
		argPrecision: starlark.String("fp32"), argOptimizer: Optimizer{defaultOptimizer("adamw")},
		argCheckpoint: starlark.String("none"), argLoRA: starlark.None, argQuant: starlark.None,
		argGPU: starlark.String("H100-80GB"), argPhase: starlark.String("train"),
		argRuntime: starlark.String("cuda"), argParallel: starlark.None, argOffload: starlark.None,
		argCluster: starlark.None, argFreeze: starlark.None, argLossChunks: starlark.MakeInt(1),
		argTokensPerBatch: starlark.None, argHostMemory: starlark.None, argQuantLMHead: starlark.False,
		argQuantFrom: starlark.None, argExpandableSegments: starlark.False,
		argValidation: starlark.False, argRollout: starlark.MakeInt(1), argFirstStep: starlark.False,
	}
	return a
}

// unpack overwrites the arguments given in args and kwargs; the model is
// required unless optional is set (replace).
func (a *trainArgs) unpack(fn string, args starlark.Tuple, kwargs []starlark.Tuple, optional bool) error {
	pairs := make([]any, 0, 2*numTrainArgs)
	for i, name := range trainArgNames {
		if i > 0 || optional {
			name += "?"
		}
		pairs = append(pairs, name, &a.vals[i])
	}
	return starlark.UnpackArgs(fn, args, kwargs, pairs...)
}

func planBuiltins() []Builtin {
	return []Builtin{{
		Name: "train",
		Sig: "train(model, batch=1, seq=None, grad_accum=1, members=1, members_mode=\"stacked\", " +
			"precision=\"fp32\", optimizer=adamw(), checkpoint=\"none\", lora=None, quant=None, " +
			"gpu=\"H100-80GB\", phase=\"train\", runtime=\"cuda\", parallel=None, offload=None, cluster=None, " +
			"freeze=None, loss_chunks=1, tokens_per_batch=None, host_memory=None, quant_lm_head=False, quant_from=None, " +
			"expandable_segments=False, validation=False, rollout=1, first_step=False)",
		Doc: "A training step to simulate: simulate(train(m, batch=8, seq=2048, precision=\"bf16-mixed\")). " +
			"batch is the micro-batch per GPU (sequences per forward) and seq the tokens per sequence, " +
			"required for models that read tokens. grad_accum > 1 keeps gradients between micro-batches. " +
			"members runs an ensemble: \"stacked\" folds members into the batch (anemoi), \"sequential\" runs " +
			"them one at a time. precision is a policy name (fp32, bf16-mixed, fp16-mixed, bf16, fp16, megatron, " +
			"fp16-master) or precision(...); optimizer an optimizer value (adamw(), sgd(momentum=0.9), " +
			"adamw8bit(), ...) or its name; checkpoint \"none\", \"full\", \"selective\" or checkpoint(...); " +
			"lora a lora(...) to train adapters over frozen weights; quant \"nf4\", \"nf4-dq\" or \"int8\" for " +
			"frozen base weights; gpu a name or gpu(...); phase \"train\" or \"eval\" (forward only); runtime " +
			"\"cuda\" (PyTorch 2.x on CUDA), \"cuda-2.1\" (torch 2.1: mean keeps its input) \"cpu-1.13\" (what shared/oracle measured) or \"cpu\" " +
			"(PyTorch 2.x on the CPU, where tools/oracle's differential-test vectors are measured). " +
			"Fine-tuning: freeze=[...] freezes modules by path prefix, role or \"all\"; loss_chunks=n runs lm_head and " +
			"cross-entropy in n chunks (torchtune); tokens_per_batch=N packs sequences into one row of N tokens " +
			"(flash varlen); offload=offload(...) with host_memory= the RAM of a node; quant_lm_head=True quantizes " +
			"lm_head too (Lightning); quant_from= the dtype weights were quantized from. " +
			"expandable_segments=True replays the step with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True " +
			"(pages mapped into one growing segment per pool; free pages unmapped when the card is full). " +
			"validation=True replays a validation forward (eval mode, no gradients, eval chunk counts: Lightning's " +
			"sanity check before the first step) through the same allocator before the step; it counts in the peaks " +
			"and the OOM (phase \"validation\"). rollout=n replays anemoi's rollout loop for a graph model built from a " +
			"data batch (encoder_processor_decoder data_variables): n prediction steps, each input built from the last " +
			"prediction, every step's graph kept until the backward. first_step=True replays the first training step: " +
			"the optimizer's state (Adam's moments) does not exist until the first optimizer.step() makes it; the " +
			"default is the steady state (step 2 onwards).\n\n" +
			"Attributes: every argument by name. plan.replace(**changes) returns a variant, the natural way to sweep.",
		Fn: trainFn,
	}}
}

func trainFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("train takes the model, then keywords (got %d positional arguments)", len(args))
	}
	a := defaultTrainArgs()
	if err := a.unpack(b.Name(), args, kwargs, false); err != nil {
		return nil, err
	}
	return newPlan(a, CallerPos(thread))
}

// replace is plan.replace(**changes).
func (x *Plan) replace(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("replace takes keywords only (train() arguments: %s)", strings.Join(trainArgNames[:], ", "))
	}
	a := x.args
	if err := a.unpack(b.Name(), nil, kwargs, true); err != nil {
		return nil, err
	}
	return newPlan(a, CallerPos(thread))
}

// newPlan resolves a's values into a sim.Plan, validates it and stores
// the canonical values back.
func newPlan(a trainArgs, decl syntax.Position) (starlark.Value, error) {
	p := &core.Plan{}
	v := &a.vals
	m, ok := v[argModel].(*Model)
	if !ok {
		return nil, fmt.Errorf("model must be a model (got %s)", v[argModel].Type())
	}
	p.Model = m.m
	for _, f := range []struct {
		i   int
		dst *int64
	}{{argBatch, &p.Batch}, {argGradAccum, &p.GradAccum}, {argMembers, &p.Members}, {argRollout, &p.Rollout}} {
		n, err := AsInt64(v[f.i], trainArgNames[f.i])
		if err != nil {
			return nil, err
		}
		*f.dst, v[f.i] = n, starlark.MakeInt64(n)
	}
	if p.Rollout < 1 {
		return nil, &units.Error{Path: "train", Msg: fmt.Sprintf("rollout must be at least 1 (got %d)", p.Rollout),
			Hint: "anemoi's training.rollout: the prediction steps per training step (1: no rollout)"}
	}
	if v[argSeq] == starlark.None {
		if m.m.TakesTokens() {
			return nil, &units.Error{
				Msg:  fmt.Sprintf("seq is required: model %q reads tokens (it starts with an embedding)", m.m.Name),
				Hint: "pass the tokens per sequence, e.g. train(model, batch=1, seq=2048)",
			}
		}
		p.Seq = 1
	} else {
		n, err := AsInt64(v[argSeq], "seq")
		if err != nil {
			return nil, err
		}
		p.Seq, v[argSeq] = n, starlark.MakeInt64(n)
	}
	for _, f := range []struct {
		i   int
		dst *string
	}{{argMembersMode, &p.MembersMode}, {argPhase, &p.Phase}} {
		s, ok := v[f.i].(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s must be a string (got %s)", trainArgNames[f.i], v[f.i].Type())
		}
		*f.dst = string(s)
	}

	var prec Precision
	if err := prec.Unpack(v[argPrecision]); err != nil {
		return nil, argError("precision", v[argPrecision], err, precisionNames())
	}
	p.Precision, v[argPrecision] = prec.p, prec

	var opt Optimizer
	if err := opt.Unpack(v[argOptimizer]); err != nil {
		return nil, argError("optimizer", v[argOptimizer], err, core.Optimizers())
	}
	p.Optimizer, v[argOptimizer] = opt.o, opt

	var ck Checkpoint
	if err := ck.Unpack(v[argCheckpoint]); err != nil {
		return nil, argError("checkpoint", v[argCheckpoint], err, []string{"none", "full", "selective"})
	}
	p.Checkpoint, v[argCheckpoint] = ck.c, ck

	switch l := v[argLoRA].(type) {
	case starlark.NoneType:
	case LoRA:
		p.LoRA = l.l
	default:
		return nil, fmt.Errorf("lora must be None or lora(...) (got %s)", l.Type())
	}

	switch q := v[argQuant].(type) {
	case starlark.NoneType:
	case starlark.String:
		p.Quant = string(q)
	default:
		return nil, fmt.Errorf("quant must be None, \"nf4\", \"nf4-dq\" or \"int8\" (got %s)", q.Type())
	}

	var g GPU
	if err := g.Unpack(v[argGPU]); err != nil {
		return nil, argError("gpu", v[argGPU], err, nil)
	}
	p.Device, v[argGPU] = g.dev, g

	rt, ok := v[argRuntime].(starlark.String)
	if !ok {
		return nil, fmt.Errorf("runtime must be a string (got %s)", v[argRuntime].Type())
	}
	r, err := core.LookupRuntime(string(rt))
	if err != nil {
		return nil, err
	}
	p.Runtime = r

	for _, f := range []struct {
		i   int
		dst *bool
	}{{argExpandableSegments, &p.ExpandableSegments}, {argValidation, &p.Validation}, {argFirstStep, &p.FirstStep}} {
		b, ok := v[f.i].(starlark.Bool)
		if !ok {
			return nil, fmt.Errorf("%s must be True or False (got %s)", trainArgNames[f.i], v[f.i].Type())
		}
		*f.dst = bool(b)
	}

	if err := resolveLayout(v, p); err != nil { // parallel= and cluster=
		return nil, err
	}
	if err := resolveFinetune(v, p); err != nil { // offload=, freeze=, loss_chunks=, ...
		return nil, err
	}

	if err := p.Validate(); err != nil {
		return nil, err // raised by the train() or replace() call itself
	}
	return &Plan{p: p, args: a, decl: decl}, nil
}

// argError words a train() argument that did not unpack: an unknown name
// keeps the lookup's own message (which says what it is) and gets a
// did-you-mean hint from known; a value of the wrong type is prefixed with
// the argument name.
func argError(what string, v starlark.Value, err error, known []string) error {
	s, ok := v.(starlark.String)
	if !ok {
		return fmt.Errorf("%s: %v", what, err)
	}
	return withHint(err, didYouMean(string(s), known))
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
	names := append([]string{"replace"}, trainArgNames[:]...)
	sort.Strings(names)
	return names
}()

func (x *Plan) AttrNames() []string { return planAttrNames }

func (x *Plan) Attr(name string) (starlark.Value, error) {
	if name == "replace" {
		return starlark.NewBuiltin("replace", x.replace).BindReceiver(x), nil
	}
	for i, n := range trainArgNames {
		if n == name {
			return x.args.vals[i], nil
		}
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
	fmt.Fprintf(&b, "train(model=%q", x.p.Model.Name)
	def := defaultTrainArgs()
	for i := argBatch; i < numTrainArgs; i++ {
		v := x.args.vals[i]
		switch {
		case i == argBatch || i == argGPU:
		case i == argSeq && v != starlark.None:
		default:
			if same(v, def.vals[i]) {
				continue
			}
		}
		fmt.Fprintf(&b, ", %s=%s", trainArgNames[i], argRepr(v))
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
		if x.c.Mode != "every" && x.c.Mode != "modules" {
			return fmt.Sprintf("%q", x.c.String())
		}
	case GPU:
		if s := x.String(); strings.HasPrefix(s, "gpu(\"") {
			return strings.TrimSuffix(strings.TrimPrefix(s, "gpu("), ")")
		}
	}
	return v.String()
}

// same compares canonical and default argument values by their repr.
func same(v, def starlark.Value) bool {
	return argRepr(v) == argRepr(def) || v.String() == def.String()
}

// Summary is a one-line description of the plan for report titles:
// "batch 1 x seq 2048, bf16-mixed, adamw, checkpoint none".
func (x *Plan) Summary() string {
	p := x.p
	parts := []string{fmt.Sprintf("batch %d", p.Batch)}
	if x.args.vals[argSeq] != starlark.None {
		parts[0] += fmt.Sprintf(" x seq %d", p.Seq)
	}
	if p.GradAccum > 1 {
		parts = append(parts, fmt.Sprintf("grad_accum %d", p.GradAccum))
	}
	if p.Members > 1 {
		parts = append(parts, fmt.Sprintf("%d members %s", p.Members, p.MembersMode))
	}
	parts = append(parts, x.args.vals[argPrecision].(Precision).Label(), x.args.vals[argOptimizer].String())
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
	if p.Phase == "eval" {
		parts = append(parts, "eval")
	}
	return strings.Join(parts, ", ")
}
