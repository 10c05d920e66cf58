package advise

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// Change is one thing a user can change without changing the model: one
// or more train() keywords set together (a smaller micro-batch comes with
// more gradient accumulation), made by the generator of one knob.
type Change struct {
	Knob     string    // the generator's knob: "checkpoint", "optimizer", ...
	Settings []Setting // what to write
}

// Setting is one train() keyword of a change and its value, as the user
// writes it. Values are the engine's: int64 (batch, grad_accum, seq,
// loss_chunks), bool (expandable_segments), string (precision,
// members_mode), core.Checkpoint, core.Optimizer, core.Parallelism,
// core.Offload (its zero value: offload=None), core.Compile, hw.Device (gpu), hw.Cluster, core.Preference (a GRPO
// objective: grpo(...)), or a ModelChange (keyword "model": a
// setting of the model's layers, such as a graph model's chunks).
type Setting struct {
	Keyword string
	Value   any
}

// ModelChange changes settings of the model's layers: Edit returns a
// copy of the model with them changed (the plan's model is left as it
// is). Text says what changed, as the layer arguments to write
// ("encoder, decoder: eval_chunks=32").
type ModelChange struct {
	Edit func(*core.Model) (*core.Model, error)
	Text string
}

// String is the change as keywords: `batch=2, grad_accum=4`.
func (c Change) String() string {
	parts := make([]string, len(c.Settings))
	for i, s := range c.Settings {
		parts[i] = s.String()
	}
	return strings.Join(parts, ", ")
}

// String is the setting as a keyword argument, in the engine's words (the
// builtins write the same through their own values).
func (s Setting) String() string {
	switch v := s.Value.(type) {
	case string:
		return fmt.Sprintf("%s=%q", s.Keyword, v)
	case bool:
		if v {
			return s.Keyword + "=True"
		}
		return s.Keyword + "=False"
	case core.Checkpoint:
		if t := v.String(); !strings.Contains(t, "(") { // "full", "op": the strings train() takes
			return fmt.Sprintf("%s=%q", s.Keyword, t)
		}
		return s.Keyword + "=" + v.String()
	case core.Optimizer:
		return s.Keyword + "=" + optimizerText(v)
	case core.Offload:
		if v == (core.Offload{}) {
			return s.Keyword + "=None"
		}
		return s.Keyword + "=" + offloadText(v)
	case hw.Device:
		return fmt.Sprintf("%s=%q", s.Keyword, v.Name)
	case ModelChange:
		return v.Text
	case core.Preference:
		return s.Keyword + "=" + v.GRPOCall()
	}
	return fmt.Sprintf("%s=%v", s.Keyword, s.Value)
}

// optimizerText is the optimizer's builtin call: adamw8bit(),
// adamw(impl="fused"), adamw(in_backward=True).
func optimizerText(o core.Optimizer) string {
	var args []string
	if o.Kind == core.SGD && o.Momentum > 0 {
		args = append(args, fmt.Sprintf("momentum=%g", o.Momentum))
	}
	if o.Impl != "" {
		args = append(args, fmt.Sprintf("impl=%q", o.Impl))
	}
	if o.InBackward {
		args = append(args, "in_backward=True")
	}
	return o.Kind.String() + "(" + strings.Join(args, ", ") + ")"
}

// offloadText is the offload() call.
func offloadText(o core.Offload) string {
	var args []string
	for _, f := range []struct{ k, v string }{{"optimizer", o.Optimizer}, {"params", o.Params}, {"activations", o.Activations}} {
		if f.v != "" {
			args = append(args, fmt.Sprintf("%s=%q", f.k, f.v))
		}
	}
	if o.SyncCopies {
		args = append(args, "streams=False")
	}
	return "offload(" + strings.Join(args, ", ") + ")"
}

// keywords are the train() keywords a change sets.
func (c Change) keywords() []string {
	out := make([]string, len(c.Settings))
	for i, s := range c.Settings {
		out[i] = s.Keyword
	}
	return out
}

// Apply returns a copy of p with the change made; p is left as it is.
func (c Change) Apply(p *core.Plan) (*core.Plan, error) {
	q := *p
	for _, s := range c.Settings {
		if err := s.apply(&q); err != nil {
			return nil, err
		}
	}
	return &q, nil
}

// apply sets one keyword in q, as train()'s setter of that keyword does
// (builtins/plans/train_keywords.go); a test replays every candidate both
// ways and compares.
func (s Setting) apply(q *core.Plan) error {
	var ok bool
	switch s.Keyword {
	case "batch":
		ok = set(&q.Batch, s.Value)
	case "grad_accum":
		ok = set(&q.GradAccum, s.Value)
	case "seq":
		ok = set(&q.Seq, s.Value)
	case "loss_chunks":
		ok = set(&q.LossChunks, s.Value)
	case "members":
		ok = set(&q.Members, s.Value)
	case "expandable_segments":
		ok = set(&q.ExpandableSegments, s.Value)
	case "members_mode":
		ok = set(&q.MembersMode, s.Value)
	case "checkpoint":
		ok = set(&q.Checkpoint, s.Value)
	case "optimizer":
		ok = set(&q.Optimizer, s.Value)
	case "parallel":
		ok = set(&q.Parallel, s.Value)
	case "cluster":
		ok = set(&q.Cluster, s.Value)
	case "compile":
		ok = set(&q.Compile, s.Value)
	case "gpu":
		ok = set(&q.Device, s.Value)
	case "offload":
		var o core.Offload
		if ok = set(&o, s.Value); ok {
			q.Offload = &o
			if o == (core.Offload{}) { // every tier taken back: offload=None
				q.Offload = nil
			}
		}
	case "preference":
		var pr core.Preference
		if ok = set(&pr, s.Value); ok {
			q.Preference = &pr
		}
	case "lora":
		var l core.LoRA
		if ok = set(&l, s.Value); ok {
			q.LoRA = &l
		}
	case "precision":
		var name string
		if ok = set(&name, s.Value); ok {
			prec, err := core.LookupPrecision(name)
			if err != nil {
				return err
			}
			q.Precision = prec
		}
	case "model":
		var m ModelChange
		if ok = set(&m, s.Value); ok {
			edited, err := m.Edit(q.Model)
			if err != nil {
				return err
			}
			q.Model = edited
		}
	default:
		return fmt.Errorf("internal error: advise cannot set %q", s.Keyword)
	}
	if !ok {
		return fmt.Errorf("internal error: advise setting %s has a %T", s.Keyword, s.Value)
	}
	return nil
}

// set stores v in *dst when v holds a T, and says whether it did.
func set[T any](dst *T, v any) bool {
	x, ok := v.(T)
	if ok {
		*dst = x
	}
	return ok
}

// compatible says whether a and b can be made together: two knobs, no
// keyword set twice (settings of the model's layers compose).
func compatible(a, b Change) bool {
	if a.Knob == b.Knob {
		return false
	}
	for _, k := range a.keywords() {
		for _, l := range b.keywords() {
			if k == l && k != "model" { // model changes edit the model in turn
				return false
			}
		}
	}
	return true
}
