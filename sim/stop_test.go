package sim

import (
	"context"
	"errors"
	"testing"
)

// countdown is a context that turns done after its Err was asked n times:
// it tells a look between ops from one at the start.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// Evaluate, a pipelined Evaluate and EvaluateSteps look at Options.Context
// during the replay (every stopEvery ops, between steps) and return its
// error, so that Ctrl-C, --timeout and --max-memory stop a long simulate().
func TestEvaluateStopsWithItsContext(t *testing.T) {
	fp32, _ := LookupPrecision("fp32")
	deep := &Model{Name: "deep", Loss: "mse", Layers: []Layer{&Repeat{Layer: &Linear{In: 64, Out: 64}, N: 4 * stopEvery}}}
	plan := func() *Plan {
		return &Plan{Model: deep, Batch: 1, Seq: 1, GradAccum: 1, Members: 1, Precision: fp32,
			Optimizer: Optimizer{Kind: "adamw"}, Device: Device{Name: "test", Memory: 80 << 30}}
	}
	pipelined := plan()
	pipelined.Parallel = Parallelism{PP: 2}
	for _, tc := range []struct {
		name string
		eval func(Options) error
	}{
		{"one GPU", func(o Options) error { _, err := Evaluate(plan(), o); return err }},
		{"a pipeline stage", func(o Options) error { _, err := Evaluate(pipelined, o); return err }},
		{"step series", func(o Options) error {
			_, err := EvaluateSteps(ngramPlan(t, 1<<20, "sparse", "device", false), o, StepSeries{TableRows: []int64{7000, 7900, 6800, 8100}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const never = 1 << 30
			live := &countdown{Context: context.Background(), n: never}
			if err := tc.eval(Options{Context: live}); err != nil {
				t.Fatalf("with a live context: %v", err)
			}
			looks := never - live.n
			if looks < 4 {
				t.Fatalf("a whole run asks its context %d times, want it asked on the way", looks)
			}
			// Done half-way through: the run stops with the context's error.
			if err := tc.eval(Options{Context: &countdown{Context: context.Background(), n: looks / 2}}); !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled from the context", err)
			}
		})
	}
}
