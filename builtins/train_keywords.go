package builtins

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// keyword is one argument of train(), declared once. train()'s signature,
// its defaults, `memsh doc train`, a plan's attributes, plan.replace() and
// sweep()'s axes all come from trainKeywords; adding a keyword is one
// entry here plus the engine code that models it.
type keyword struct {
	name string
	def  starlark.Value // the default; nil for the required model
	sig  string         // the default as the signature writes it, when not def's repr
	doc  string
	// set resolves the keyword's value v (others in a, already resolved
	// when they come earlier in the table) into p, and stores the
	// canonical value back in v so that replace() can re-run it.
	set func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error
}

// trainKeywords are train()'s arguments in signature order.
var trainKeywords = []keyword{
	{name: "model", doc: "the model to train (model(), a stdlib zoo model or hf_config())", set: setModel},
	{name: "batch", def: starlark.MakeInt(1), doc: "the micro-batch per GPU: sequences (or samples) per forward",
		set: setInt(func(p *core.Plan) *int64 { return &p.Batch })},
	{name: "seq", def: starlark.None, doc: "tokens per sequence (the padded length); required for models that read tokens",
		set: setSeq},
	{name: "grad_accum", def: starlark.MakeInt(1), doc: "micro-batches per optimizer step; > 1 keeps gradients between micro-batches",
		set: setInt(func(p *core.Plan) *int64 { return &p.GradAccum })},
	{name: "members", def: starlark.MakeInt(1), doc: "ensemble members of a graph model",
		set: setInt(func(p *core.Plan) *int64 { return &p.Members })},
	{name: "members_mode", def: starlark.String("stacked"), doc: `"stacked" folds members into the batch (anemoi), "sequential" runs them one at a time`,
		set: setString(func(p *core.Plan) *string { return &p.MembersMode })},
	{name: "precision", def: starlark.String("fp32"),
		doc: "a policy name (fp32, bf16-mixed, fp16-mixed, bf16, fp16, megatron, fp16-master) or precision(...)", set: setPrecision},
	{name: "optimizer", def: Optimizer{defaultOptimizer(core.AdamW)}, sig: "adamw()",
		doc: "an optimizer value (adamw(), sgd(momentum=0.9), adamw8bit(), ...) or its name", set: setOptimizer},
	{name: "checkpoint", def: starlark.String("none"), doc: `activation checkpointing: "none", "full", "selective" or checkpoint(...)`,
		set: setCheckpoint},
	{name: "lora", def: starlark.None, doc: "lora(...) trains adapters over frozen weights", set: setLoRA},
	{name: "quant", def: starlark.None, doc: `"nf4", "nf4-dq" or "int8": quantized frozen base weights (bitsandbytes)`, set: setQuant},
	{name: "gpu", def: starlark.String("H100-80GB"), doc: "a catalog name or gpu(...)", set: setGPU},
	{name: "phase", def: starlark.String("train"), doc: `"train", or "eval" (a forward without gradients)`,
		set: setPhase},
	{name: "runtime", def: starlark.String("cuda"),
		doc: `"cuda" (PyTorch 2.x on CUDA), "cuda-2.1" (torch 2.1: mean keeps its input), "cpu-1.13" (what shared/oracle measured) ` +
			`or "cpu" (PyTorch 2.x on the CPU, where tools/oracle's differential-test vectors are measured)`, set: setRuntime},
	{name: "parallel", def: starlark.None, doc: "parallel(...): the distributed layout (data, tensor, pipeline, context and expert parallelism, ZeRO, FSDP)",
		set: setParallel},
	{name: "offload", def: starlark.None, doc: "offload(...): optimizer state, parameters or activations in host memory or on NVMe",
		set: setOffload},
	{name: "cluster", def: starlark.None, doc: "cluster(...): the nodes and links the layout runs on", set: setCluster},
	{name: "freeze", def: starlark.None, doc: `modules to freeze, by path prefix, role or "all"`, set: setFreeze},
	{name: "loss_chunks", def: starlark.MakeInt(1), doc: "runs lm_head and cross-entropy in n chunks (torchtune's num_output_chunks)",
		set: setOptionalInt(func(p *core.Plan) *int64 { return &p.LossChunks })},
	{name: "tokens_per_batch", def: starlark.None, doc: "packs sequences into one row of N tokens (flash varlen)",
		set: setOptionalInt(func(p *core.Plan) *int64 { return &p.TokensPerBatch })},
	{name: "host_memory", def: starlark.None, doc: "the host RAM of one node, checked with offload",
		set: setOptionalInt(func(p *core.Plan) *int64 { return &p.HostMemory })},
	{name: "quant_lm_head", def: starlark.False, doc: "quantizes lm_head too (Lightning's BitsandbytesPrecision)",
		set: setBool(func(p *core.Plan) *bool { return &p.QuantLMHead })},
	{name: "quant_from", def: starlark.None, doc: "the dtype the weights were quantized from (what dequantization returns)", set: setQuantFrom},
	{name: "expandable_segments", def: starlark.False,
		doc: "replays the step with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (pages mapped into one growing segment per pool; free pages unmapped when the card is full)",
		set: setBool(func(p *core.Plan) *bool { return &p.ExpandableSegments })},
	{name: "validation", def: starlark.False,
		doc: `replays a validation forward (eval mode, no gradients, eval chunk counts: Lightning's sanity check before the first step) through the same allocator before the step; it counts in the peaks and the OOM (phase "validation")`,
		set: setBool(func(p *core.Plan) *bool { return &p.Validation })},
	{name: "rollout", def: starlark.MakeInt(1),
		doc: "anemoi's rollout loop for a graph model built from a data batch: n prediction steps, each input built from the last prediction, every step's graph kept until the backward",
		set: setRollout},
	{name: "first_step", def: starlark.False,
		doc: "replays the first training step, before the first optimizer.step() makes the optimizer's state (Adam's moments); the default is the steady state (step 2 onwards)",
		set: setBool(func(p *core.Plan) *bool { return &p.FirstStep })},
}

// keywordIndex finds a keyword's position in trainKeywords.
var keywordIndex = func() map[string]int {
	m := make(map[string]int, len(trainKeywords))
	for i, k := range trainKeywords {
		m[k.name] = i
	}
	return m
}()

// trainArgNames are the keywords' names in signature order.
func trainArgNames() []string {
	names := make([]string, len(trainKeywords))
	for i, k := range trainKeywords {
		names[i] = k.name
	}
	return names
}

// trainSig is train()'s signature.
func trainSig() string {
	parts := []string{"model"}
	for _, k := range trainKeywords[1:] {
		d := k.sig
		if d == "" {
			d = k.def.String()
		}
		parts = append(parts, k.name+"="+d)
	}
	return "train(" + strings.Join(parts, ", ") + ")"
}

// trainDoc is train()'s documentation: a summary, then each keyword.
func trainDoc() string {
	var b strings.Builder
	b.WriteString("A training step to simulate: simulate(train(m, batch=8, seq=2048, precision=\"bf16-mixed\")).\n\n")
	b.WriteString("Keywords:\n")
	for _, k := range trainKeywords {
		fmt.Fprintf(&b, "- %s: %s.\n", k.name, k.doc)
	}
	b.WriteString("\nAttributes: every argument by name. plan.replace(**changes) returns a variant, the natural way to sweep.")
	return b.String()
}

// trainArgs holds train()'s arguments, resolved to canonical values
// (ints, a GPU, a Precision, ...) so that replace() can re-run them.
type trainArgs struct {
	vals []starlark.Value // by position in trainKeywords
}

func defaultTrainArgs() trainArgs {
	a := trainArgs{vals: make([]starlark.Value, len(trainKeywords))}
	for i, k := range trainKeywords {
		a.vals[i] = k.def
	}
	return a
}

// clone copies the values, so a variant does not write into its origin.
func (a trainArgs) clone() trainArgs {
	return trainArgs{vals: append([]starlark.Value(nil), a.vals...)}
}

// get is the value of the keyword name.
func (a *trainArgs) get(name string) starlark.Value { return a.vals[keywordIndex[name]] }

// set replaces the value of the keyword name.
func (a *trainArgs) set(name string, v starlark.Value) { a.vals[keywordIndex[name]] = v }

// unpack overwrites the arguments given in args and kwargs; the model is
// required unless optional is set (replace).
func (a *trainArgs) unpack(fn string, args starlark.Tuple, kwargs []starlark.Tuple, optional bool) error {
	pairs := make([]any, 0, 2*len(trainKeywords))
	for i, k := range trainKeywords {
		name := k.name
		if i > 0 || optional {
			name += "?"
		}
		pairs = append(pairs, name, &a.vals[i])
	}
	return starlark.UnpackArgs(fn, args, kwargs, pairs...)
}

// resolve sets every keyword into a new plan, in table order.
func (a *trainArgs) resolve() (*core.Plan, error) {
	p := &core.Plan{}
	for i, k := range trainKeywords {
		if err := k.set(k.name, &a.vals[i], a, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Setters shared by keywords of one type.

func setInt(dst func(*core.Plan) *int64) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		n, err := host.AsInt64(*v, name)
		if err != nil {
			return err
		}
		*dst(p), *v = n, starlark.MakeInt64(n)
		return nil
	}
}

// setOptionalInt is setInt for keywords that may be None (left unset).
func setOptionalInt(dst func(*core.Plan) *int64) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	set := setInt(dst)
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		if *v == starlark.None {
			return nil
		}
		return set(name, v, a, p)
	}
}

func setString(dst func(*core.Plan) *string) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		s, ok := (*v).(starlark.String)
		if !ok {
			return fmt.Errorf("%s must be a string (got %s)", name, (*v).Type())
		}
		*dst(p) = string(s)
		return nil
	}
}

func setBool(dst func(*core.Plan) *bool) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		b, ok := (*v).(starlark.Bool)
		if !ok {
			return fmt.Errorf("%s must be True or False (got %s)", name, (*v).Type())
		}
		*dst(p) = bool(b)
		return nil
	}
}

// Setters of one keyword each.

func setModel(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	m, ok := (*v).(*Model)
	if !ok {
		return fmt.Errorf("model must be a model (got %s)", (*v).Type())
	}
	p.Model = m.m
	return nil
}

func setSeq(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		if p.Model.TakesTokens() {
			return &units.Error{
				Msg:  fmt.Sprintf("seq is required: model %q reads tokens (it starts with an embedding)", p.Model.Name),
				Hint: "pass the tokens per sequence, e.g. train(model, batch=1, seq=2048)",
			}
		}
		p.Seq = 1
		return nil
	}
	n, err := host.AsInt64(*v, "seq")
	if err != nil {
		return err
	}
	p.Seq, *v = n, starlark.MakeInt64(n)
	return nil
}

func setRollout(_ string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
	if err := setInt(func(p *core.Plan) *int64 { return &p.Rollout })("rollout", v, a, p); err != nil {
		return err
	}
	if p.Rollout < 1 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("rollout must be at least 1 (got %d)", p.Rollout),
			Hint: "anemoi's training.rollout: the prediction steps per training step (1: no rollout)"}
	}
	return nil
}

func setPrecision(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	var prec Precision
	if err := prec.Unpack(*v); err != nil {
		return argError("precision", *v, err, precisionNames())
	}
	p.Precision, *v = prec.p, prec
	return nil
}

func setOptimizer(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	var opt Optimizer
	if err := opt.Unpack(*v); err != nil {
		return argError("optimizer", *v, err, core.Optimizers())
	}
	p.Optimizer, *v = opt.o, opt
	return nil
}

func setCheckpoint(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	var ck Checkpoint
	if err := ck.Unpack(*v); err != nil {
		return argError("checkpoint", *v, err, []string{"none", "full", "selective"})
	}
	p.Checkpoint, *v = ck.c, ck
	return nil
}

func setLoRA(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch l := (*v).(type) {
	case starlark.NoneType:
	case LoRA:
		p.LoRA = l.l
	default:
		return fmt.Errorf("lora must be None or lora(...) (got %s)", l.Type())
	}
	return nil
}

func setQuant(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch q := (*v).(type) {
	case starlark.NoneType:
	case starlark.String:
		p.Quant = string(q)
	default:
		return fmt.Errorf("quant must be None, \"nf4\", \"nf4-dq\" or \"int8\" (got %s)", q.Type())
	}
	return nil
}

func setGPU(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	var g GPU
	if err := g.Unpack(*v); err != nil {
		return argError("gpu", *v, err, nil)
	}
	p.Device, *v = g.dev, g
	return nil
}

func setRuntime(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	rt, ok := (*v).(starlark.String)
	if !ok {
		return fmt.Errorf("runtime must be a string (got %s)", (*v).Type())
	}
	r, err := core.LookupRuntime(string(rt))
	if err != nil {
		return err
	}
	p.Runtime = r
	return nil
}

func setParallel(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch x := (*v).(type) {
	case starlark.NoneType:
	case Parallel:
		p.Parallel = x.p
	default:
		return fmt.Errorf("parallel must be None or parallel(dp=..., tp=..., ...) (got %s)", x.Type())
	}
	return nil
}

func setCluster(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch x := (*v).(type) {
	case starlark.NoneType:
	case Cluster:
		p.Cluster = x.c
	default:
		return fmt.Errorf("cluster must be None or cluster(nodes=..., gpus_per_node=...) (got %s)", x.Type())
	}
	return nil
}

func setOffload(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch o := (*v).(type) {
	case starlark.NoneType:
	case Offload:
		p.Offload = o.o
	default:
		return fmt.Errorf("offload must be None or offload(...) (got %s)", o.Type())
	}
	return nil
}

func setFreeze(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		return nil
	}
	names, err := stringList(*v, "freeze")
	if err != nil {
		return err
	}
	p.Freeze = names
	return nil
}

func setQuantFrom(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		return nil
	}
	var d host.DType
	if err := d.Unpack(*v); err != nil {
		return fmt.Errorf("quant_from: %v", err)
	}
	p.QuantFrom, *v = d.D, d
	return nil
}

func setPhase(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	s, ok := (*v).(starlark.String)
	if !ok {
		return fmt.Errorf("phase must be a string (got %s)", (*v).Type())
	}
	ph, err := core.ParsePhase(string(s))
	if err != nil {
		return &units.Error{Path: "train", Msg: err.Error()}
	}
	p.Phase = ph
	return nil
}
