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
// core.Offload (its zero value: offload=None), core.Compile, hw.Device (gpu), hw.Cluster, or a ModelChange (keyword "model": a
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
	if o.Impl != "" && o.Impl != "foreach" {
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
	bad := func() error {
		return fmt.Errorf("internal error: advise setting %s has a %T", s.Keyword, s.Value)
	}
	switch s.Keyword {
	case "batch", "grad_accum", "seq", "loss_chunks", "members":
		n, ok := s.Value.(int64)
		if !ok {
			return bad()
		}
		switch s.Keyword {
		case "batch":
			q.Batch = n
		case "grad_accum":
			q.GradAccum = n
		case "seq":
			q.Seq = n
		case "loss_chunks":
			q.LossChunks = n
		case "members":
			q.Members = n
		}
	case "expandable_segments":
		b, ok := s.Value.(bool)
		if !ok {
			return bad()
		}
		q.ExpandableSegments = b
	case "members_mode":
		m, ok := s.Value.(string)
		if !ok {
			return bad()
		}
		q.MembersMode = m
	case "precision":
		name, ok := s.Value.(string)
		if !ok {
			return bad()
		}
		prec, err := core.LookupPrecision(name)
		if err != nil {
			return err
		}
		q.Precision = prec
	case "checkpoint":
		c, ok := s.Value.(core.Checkpoint)
		if !ok {
			return bad()
		}
		q.Checkpoint = c
	case "optimizer":
		o, ok := s.Value.(core.Optimizer)
		if !ok {
			return bad()
		}
		q.Optimizer = o
	case "parallel":
		par, ok := s.Value.(core.Parallelism)
		if !ok {
			return bad()
		}
		q.Parallel = par
	case "offload":
		o, ok := s.Value.(core.Offload)
		if !ok {
			return bad()
		}
		q.Offload = &o
		if o == (core.Offload{}) { // every tier taken back: offload=None
			q.Offload = nil
		}
	case "cluster":
		c, ok := s.Value.(hw.Cluster)
		if !ok {
			return bad()
		}
		q.Cluster = c
	case "compile":
		c, ok := s.Value.(core.Compile)
		if !ok {
			return bad()
		}
		q.Compile = c
	case "lora":
		l, ok := s.Value.(core.LoRA)
		if !ok {
			return bad()
		}
		q.LoRA = &l
	case "gpu":
		d, ok := s.Value.(hw.Device)
		if !ok {
			return bad()
		}
		q.Device = d
	case "model":
		m, ok := s.Value.(ModelChange)
		if !ok {
			return bad()
		}
		edited, err := m.Edit(q.Model)
		if err != nil {
			return err
		}
		q.Model = edited
	default:
		return fmt.Errorf("internal error: advise cannot set %q", s.Keyword)
	}
	return nil
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
