package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestPipelineScheduleMemory counts each stage's saved activations by
// hand for gptStack's equal blocks:
//
//   - zb-h1 keeps 1F1B's micro-batches in flight: min(pp-s, m) per stage,
//     pp=4, 8 blocks, m=8: 4, 3, 2, 1 micro-batches of 2 blocks;
//   - zb-v: pp=2, 8 blocks in 4 chunks of 2, stage 0 holding chunks 0 and
//     3, stage 1 chunks 1 and 2; every stage min(pp, m) = 2 micro-batches
//     through both chunks: 2 x 2 x 2 = 8 blocks, as 1F1B's first stage;
//   - dualpipe: pp=4, 8 blocks in 4 stages of 2, stage s also holding
//     stage 3-s; pp+1 = 5 stage forwards in flight with m=8 (10 blocks),
//     m=4 with m=4 (8 blocks), on every stage.
func TestPipelineScheduleMemory(t *testing.T) {
	m := gptStack(8)
	one := evalPlan(t, distPlan(t, m, "bf16", core.Parallelism{}))
	perLayer := one.SavedActivations / 8
	for _, tc := range []struct {
		par  core.Parallelism
		want []int64
	}{
		{core.Parallelism{PP: 4, MicroBatches: 8, Schedule: "zb-h1"}, []int64{8, 6, 4, 2}},
		{core.Parallelism{PP: 2, MicroBatches: 4, Schedule: "zb-v"}, []int64{8, 8}},
		{core.Parallelism{PP: 4, MicroBatches: 8, Schedule: "dualpipe"}, []int64{10, 10, 10, 10}},
		{core.Parallelism{PP: 4, MicroBatches: 4, Schedule: "dualpipe"}, []int64{8, 8, 8, 8}},
	} {
		rep := evalPlan(t, distPlan(t, m, "bf16", tc.par))
		for s, blocks := range tc.want {
			if got := rep.Ranks[s].SavedActivations; got != blocks*perLayer {
				t.Errorf("%s: stage %d saves %d, want %d blocks x %d", tc.par, s, got, blocks, perLayer)
			}
		}
	}
}

// TestDualPipeHoldsParametersTwice: DualPipe's stage s holds its own
// stage and stage pp-1-s, so with pp=2 each GPU holds the whole model:
// the embedding, four blocks, the final norm and the untied head.
// ZB-V's first stage holds the first and the last chunk: the embedding,
// the head and the loss on one GPU.
func TestDualPipeHoldsParametersTwice(t *testing.T) {
	block := oracleBlock(oracleCase{kind: "gpt2", h: 256, a: 4})
	m := &core.Model{Name: "gpt", Layers: []core.Layer{&nn.Embedding{Rows: 1024, Dim: 256}, &core.Repeat{Layer: block, N: 4}, &nn.Norm{Dim: 256, Bias: true}},
		Vocab: 1024}
	whole := m.Params() // the untied head included
	for _, tc := range []struct {
		par  core.Parallelism
		want []int64
	}{
		{core.Parallelism{PP: 2, MicroBatches: 4, Schedule: "dualpipe"}, []int64{whole, whole}},
		{core.Parallelism{PP: 2, MicroBatches: 4, Schedule: "zb-v"}, []int64{1024*256 + 2*block.Params() + 2*256 + 256*1024, 2 * block.Params()}},
	} {
		rep := evalPlan(t, distPlan(t, m, "bf16", tc.par))
		for s, want := range tc.want {
			if got := rep.Ranks[s].States.Params / 2; got != want { // bf16
				t.Errorf("%s: stage %d holds %d parameters, want %d", tc.par, s, got, want)
			}
		}
	}
}

// TestZeroBubbleShrinksTheBubble: on the same layout the deferred weight
// gradients shrink 1F1B's bubble, (p-1)(F+B) > (p-1)(F+B-2W) (ZB-H1) >
// ZB-V's half-stage (p-1)(F+B-3W)/2; DualPipe's (p/2-1)(F+B+B-3W)/2 is
// below 1F1B's too. The steady state is the same for the 1F1B-shaped
// schedules: their steps differ by their bubbles.
func TestZeroBubbleShrinksTheBubble(t *testing.T) {
	m := gptStack(16)
	bubble := map[string]float64{}
	step := map[string]float64{}
	for _, s := range []string{"1f1b", "zb-h1", "zb-v", "dualpipe"} {
		p := distPlan(t, m, "bf16", core.Parallelism{PP: 4, MicroBatches: 8, Schedule: s})
		p.Batch, p.Seq = 4, 512
		r := evalPlan(t, p)
		for _, b := range r.Time.Breakdown {
			if b.Name == "bubble" {
				bubble[s] = b.Seconds
			}
		}
		step[s] = r.Time.StepSeconds
	}
	if !(bubble["1f1b"] > bubble["zb-h1"] && bubble["zb-h1"] > bubble["zb-v"] && bubble["zb-v"] >= 0 && bubble["dualpipe"] < bubble["1f1b"]) {
		t.Errorf("bubbles %v: want 1f1b > zb-h1 > zb-v >= 0 and dualpipe < 1f1b", bubble)
	}
	t.Logf("bubbles %v, steps %v", bubble, step)
	if d := (step["1f1b"] - bubble["1f1b"]) - (step["zb-h1"] - bubble["zb-h1"]); d*d > 1e-18 {
		t.Errorf("1f1b and zb-h1 steady states differ by %g s", d)
	}
}

// TestScheduleErrors: impossible schedules are errors naming the numbers.
func TestScheduleErrors(t *testing.T) {
	for _, tc := range []struct {
		par  core.Parallelism
		want string
	}{
		{core.Parallelism{PP: 3, Schedule: "dualpipe", MicroBatches: 4}, "dualpipe needs an even pp (got pp=3)"},
		{core.Parallelism{PP: 4, Schedule: "dualpipe", MicroBatches: 5}, "dualpipe needs an even number of micro-batches (got 5)"},
		{core.Parallelism{PP: 2, Schedule: "zb-v", VirtualStages: 4}, "the zb-v schedule holds 2 chunks per stage (got virtual_stages=4)"},
		{core.Parallelism{PP: 2, Schedule: "zb-h1", VirtualStages: 2}, `virtual_stages=2 needs schedule="interleaved" or "zb-v"`},
		{core.Parallelism{Schedule: "zb-h1"}, "the zb-h1 schedule needs pp >= 2 (got pp=1)"},
		{core.Parallelism{PP: 2, Schedule: "zb-v", FirstStageLayers: 2}, "follow the interleaved chunk order"},
		{core.Parallelism{PP: 2, Schedule: "gpipe"}, `unknown schedule "gpipe"`},
		{core.Parallelism{PP: 4, Schedule: "zb-v", MicroBatches: 4}, "pp*virtual_stages = 8 does not divide 12 layers"},
	} {
		err := distPlan(t, gptStack(12), "bf16", tc.par).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.par, err, tc.want)
		}
	}
}
