package plans

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// The setters of train()'s keywords that take one keyword each (the
// table and the setters shared by keywords of one type are in
// train_keywords.go).

func setDispatch(name string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		p.Overheads.Dispatch = ""
		return nil
	}
	s, ok := (*v).(starlark.String)
	if !ok {
		return fmt.Errorf("%s must be a string or None (got %s)", name, (*v).Type())
	}
	p.Overheads.Dispatch = string(s)
	return p.Overheads.Validate()
}

func setImages(name string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		p.Images = core.Images{}
		return nil
	}
	t, ok := (*v).(starlark.Tuple)
	if !ok || len(t) != 3 {
		return host.WithHint(fmt.Errorf("train: %s must be a tuple (count, height, width) (got %s)", name, describeSeq(*v)),
			name+"=(2, 448, 448): two images of 448 x 448 pixels in each sample")
	}
	var n [3]int64
	for i, what := range []string{"count", "height", "width"} {
		x, err := host.AsInt64(t[i], name+" "+what)
		if err != nil {
			return err
		}
		n[i] = x
	}
	p.Images = core.Images{Count: n[0], Height: n[1], Width: n[2]}
	return p.Images.Validate()
}

// describeSeq is v's type, with its length for a sequence other than a
// string ("a list of 2"), for the tuple keywords' errors.
func describeSeq(v starlark.Value) string {
	got := v.Type()
	if s, isSeq := v.(starlark.Sequence); isSeq && got != "string" {
		got = fmt.Sprintf("a %s of %d", got, s.Len())
	}
	return got
}

func setVideos(name string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		p.Videos = core.Videos{}
		return nil
	}
	t, ok := (*v).(starlark.Tuple)
	if !ok || len(t) < 4 || len(t) > 5 {
		return host.WithHint(fmt.Errorf("train: %s must be a tuple (count, frames, height, width) or (count, frames, height, width, fps) (got %s)", name, describeSeq(*v)),
			name+"=(1, 16, 448, 448): one video of 16 frames of 448 x 448 pixels in each sample, sampled 2 a second")
	}
	var n [4]int64
	for i, what := range []string{"count", "frames", "height", "width"} {
		x, err := host.AsInt64(t[i], name+" "+what)
		if err != nil {
			return err
		}
		n[i] = x
	}
	fps := core.DefaultVideoFPS
	if len(t) == 5 {
		f, err := host.AsFloat(t[4], name+" fps")
		if err != nil {
			return err
		}
		fps = f
	}
	p.Videos = core.Videos{Count: n[0], Frames: n[1], Height: n[2], Width: n[3], FPS: fps}
	*v = starlark.Tuple{t[0], t[1], t[2], t[3], starlark.Float(fps)}
	return p.Videos.Validate()
}

func setStepOverhead(name string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	f, err := host.AsFloat(*v, name)
	if err != nil {
		return err
	}
	p.Overheads.StepSeconds = f
	*v = starlark.Float(f)
	return p.Overheads.Validate()
}

func setTrainMetrics(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
	if err := setInt(func(p *core.Plan) *int64 { return &p.Overheads.TrainMetrics })(name, v, a, p); err != nil {
		return err
	}
	return p.Overheads.Validate()
}

func setClipGradNorm(name string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		p.Overheads.ClipGradNorm = 0
		return nil
	}
	f, err := host.AsFloat(*v, name)
	if err != nil {
		return err
	}
	if !(f > 0) {
		return fmt.Errorf("%s must be a norm > 0, or None for no clipping (got %g)", name, f)
	}
	p.Overheads.ClipGradNorm = f
	*v = starlark.Float(f)
	return p.Overheads.Validate()
}

func setModel(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	m, ok := (*v).(*models.Model)
	if !ok {
		return fmt.Errorf("model must be a model (got %s)", (*v).Type())
	}
	p.Model = m.M
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
		return argError("checkpoint", *v, err, []string{"none", "full", "selective", "op"})
	}
	p.Checkpoint, *v = ck.c, ck
	return nil
}

func setCompile(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch c := (*v).(type) {
	case starlark.Bool:
		p.Compile = core.Compile{Blocks: bool(c), Loss: bool(c)}
	case starlark.String:
		cc, err := core.ParseCompile(string(c))
		if err != nil {
			return err
		}
		p.Compile = cc
	default:
		return fmt.Errorf("compile must be True, False, \"blocks\" or \"loss\" (got %s)", c.Type())
	}
	return nil
}

func setZeroGrad(name string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	s, ok := (*v).(starlark.String)
	switch {
	case ok && s == "none":
		p.KeepGrads = false
	case ok && s == "zeros":
		p.KeepGrads = true
	default:
		return fmt.Errorf("%s must be \"none\" (set_to_none=True) or \"zeros\" (set_to_none=False) (got %s)", name, (*v).String())
	}
	return nil
}

func setFloat8(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch f := (*v).(type) {
	case starlark.NoneType:
		p.Float8.Scaling = ""
	case starlark.String:
		p.Float8.Scaling = string(f) // checked by core.Plan.Validate
	default:
		return fmt.Errorf("float8 must be None, \"tensorwise\", \"rowwise\" or a Transformer Engine recipe such as \"te-delayed\" (got %s)", f.Type())
	}
	return nil
}

func setLoRA(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch l := (*v).(type) {
	case starlark.NoneType:
	case LoRA:
		p.LoRA = l.l
	default:
		err := fmt.Errorf("lora must be None or lora(...) (got %s)", l.Type())
		if l == starlark.True {
			return host.WithHint(err, `lora=lora() adapts q and v at rank 8, alpha 16 (PEFT's LoraConfig defaults); lora(targets=["all-linear"]) every linear`)
		}
		return err
	}
	return nil
}

func setQuant(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch q := (*v).(type) {
	case starlark.NoneType:
	case starlark.String:
		p.Quant = string(q)
	default:
		return fmt.Errorf("quant must be None, \"nf4\", \"nf4-dq\", \"int8\" or \"torchao-nf4\" (got %s)", q.Type())
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
		p.Parallel = x.P
	default:
		return fmt.Errorf("parallel must be None or parallel(dp=..., tp=..., ...) (got %s)", x.Type())
	}
	return nil
}

func setCluster(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch x := (*v).(type) {
	case starlark.NoneType:
	case Cluster:
		p.Cluster = x.C
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

func setTrainable(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		return nil
	}
	names, err := stringList(*v, "trainable")
	if err != nil {
		return err
	}
	p.Trainable = names
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

func setQuantStorage(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	if *v == starlark.None {
		return nil
	}
	var d host.DType
	if err := d.Unpack(*v); err != nil {
		return fmt.Errorf("quant_storage: %v", err)
	}
	p.QuantStorage, *v = d.D, d
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

func setQAT(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch q := (*v).(type) {
	case starlark.NoneType:
		p.QAT.Scheme = ""
	case starlark.String:
		p.QAT.Scheme = string(q) // checked by core.Plan.Validate
	default:
		return fmt.Errorf("qat must be None, \"8da4w\" or \"int8-int4\" (got %s)", q.Type())
	}
	return nil
}

func setQATHead(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	on, ok := (*v).(starlark.Bool)
	if !ok {
		return fmt.Errorf("qat_head must be True or False (got %s)", (*v).Type())
	}
	p.QAT.NoHead = !bool(on)
	return nil
}

// setKeepLogits is keep_logits: True or False, or "next" (Plan.KeepLogitsNext).
func setKeepLogits(name string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch x := (*v).(type) {
	case starlark.Bool:
		p.KeepLogits, p.KeepLogitsNext = bool(x), false
		return nil
	case starlark.String:
		if x == "next" {
			p.KeepLogits, p.KeepLogitsNext = true, true
			return nil
		}
	}
	return &units.Error{Msg: fmt.Sprintf("%s must be True, False or \"next\" (got %s)", name, (*v).String()),
		Hint: name + "=True holds the logits through the backward, \"next\" until the next micro-batch's forward returns"}
}
