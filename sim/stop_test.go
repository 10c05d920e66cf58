package sim

import (
	"context"
	"errors"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
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
	fp32, _ := core.LookupPrecision("fp32")
	deep := &core.Model{Name: "deep", Loss: "mse", Layers: []core.Layer{&core.Repeat{Layer: &nn.Linear{In: 64, Out: 64}, N: 4 * core.StopEvery}}}
	plan := func() *core.Plan {
		return &core.Plan{Model: deep, Batch: 1, Seq: 1, GradAccum: 1, Members: 1, Precision: fp32,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: hw.Device{Name: "test", Memory: 80 << 30}}
	}
	pipelined := plan()
	pipelined.Parallel = core.Parallelism{PP: 2}
	for _, tc := range []struct {
		name string
		eval func(core.Options) error
	}{
		{"one GPU", func(o core.Options) error { _, err := Evaluate(plan(), o); return err }},
		{"a pipeline stage", func(o core.Options) error { _, err := Evaluate(pipelined, o); return err }},
		{"step series", func(o core.Options) error {
			_, err := EvaluateSteps(ngramPlan(t, 1<<20, "sparse", "device", false), o, replay.StepSeries{TableRows: []int64{7000, 7900, 6800, 8100}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const never = 1 << 30
			live := &countdown{Context: context.Background(), n: never}
			if err := tc.eval(core.Options{Context: live}); err != nil {
				t.Fatalf("with a live context: %v", err)
			}
			looks := never - live.n
			if looks < 4 {
				t.Fatalf("a whole run asks its context %d times, want it asked on the way", looks)
			}
			// Done half-way through: the run stops with the context's error.
			if err := tc.eval(core.Options{Context: &countdown{Context: context.Background(), n: looks / 2}}); !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled from the context", err)
			}
		})
	}
}
