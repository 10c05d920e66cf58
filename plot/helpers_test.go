package plot

import (
	"testing"

	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// quickstartReport simulates a quickstart-like step with its timeline: a
// 12-layer GPT-style decoder (width 1024, vocab 32000), batch 8 x 1024,
// bf16 autocast, AdamW, full activation checkpointing, on an RTX 4090: a
// forward ramp, recompute spikes in backward, and an optimizer step.
func quickstartReport(t testing.TB, gpu string, batch int64) *replay.Report {
	t.Helper()
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "ln_1", Dim: 1024},
			&nn.Attention{Name: "attn", Dim: 1024, Heads: 16, Impl: "flash", Causal: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "ln_2", Dim: 1024},
			&nn.MLP{Name: "mlp", Dim: 1024, Hidden: 4096, Act: "gelu"},
		}}},
	}}
	m := &core.Model{
		Name: "gpt-350m",
		Layers: []core.Layer{
			&nn.Embedding{Name: "wte", Rows: 32000, Dim: 1024},
			&core.Repeat{Name: "h", Layer: block, N: 12},
			&nn.Norm{Name: "ln_f", Dim: 1024},
		},
		Vocab: 32000, Loss: "cross_entropy", LogitsFP32: true,
	}
	prec, err := core.LookupPrecision("bf16-mixed")
	must(t, err)
	ckpt, err := core.ParseCheckpoint("full")
	must(t, err)
	dev, err := hw.LookupDevice(gpu)
	must(t, err)
	rt, err := core.LookupRuntime("cuda")
	must(t, err)
	plan := &core.Plan{Model: m, Batch: batch, Seq: 1024, GradAccum: 1, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ckpt, Device: dev, Runtime: rt, Phase: core.Train}
	r, err := sim.Evaluate(plan, core.Options{Timeline: true})
	must(t, err)
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
