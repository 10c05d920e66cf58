package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// llamaModel builds a Llama-style decoder (RMSNorm, rotary GQA attention,
// SwiGLU MLP, untied head).
func llamaModel(hidden, layers, heads, kv, ffn, vocab int64, impl string) *core.Model {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: hidden, RMS: true},
			&nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, Impl: impl, Causal: true, Rope: true, SoftmaxFP32: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: hidden, RMS: true},
			&nn.MLP{Dim: hidden, Hidden: ffn, Act: "swiglu"},
		}}},
	}}
	return &core.Model{
		Name: "llama",
		Layers: []core.Layer{
			&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
			&core.Repeat{Name: "layers", Layer: block, N: layers},
			&nn.Norm{Name: "norm", Dim: hidden, RMS: true},
		},
		Vocab: vocab, Loss: "cross_entropy", LogitsFP32: true,
	}
}

func llamaPlan(m *core.Model, batch, seq int64, precision, ckpt string, dev string) *core.Plan {
	p, _ := core.LookupPrecision(precision)
	c, _ := core.ParseCheckpoint(ckpt)
	d, _ := hw.LookupDevice(dev)
	rt, _ := core.LookupRuntime("cuda")
	return &core.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: 1, Members: 1, Precision: p,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: c, Device: d, Runtime: rt}
}

// BenchmarkEvaluateLlama70B evaluates one Llama-3-70B-sized plan (80 layers)
// on one GPU: lowering, replay and the allocator model.
func BenchmarkEvaluateLlama70B(b *testing.B) {
	m := llamaModel(8192, 80, 64, 8, 28672, 128256, "flash")
	plan := llamaPlan(m, 1, 8192, "bf16-mixed", "full", "H100-80GB")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// The same step with expandable segments (alloc/allocator_expandable.go) and a
// validation pass before it (core/validation.go): the page-mapping allocator
// and a second, forward-only replay.
func BenchmarkEvaluateLlama70BExpandableValidation(b *testing.B) {
	m := llamaModel(8192, 80, 64, 8, 28672, 128256, "flash")
	plan := llamaPlan(m, 1, 8192, "bf16-mixed", "full", "H100-80GB")
	plan.ExpandableSegments, plan.Validation = true, true
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluateBris3Sequential is SEEDS.md story 1's final attempt:
// Bris with 3 members one at a time, a validation pass first, expandable
// segments (graph_bris_test.go's plan).
func BenchmarkEvaluateBris3Sequential(b *testing.B) {
	plan := bris(b, 3, "sequential", 4, 32, "train")
	plan.Validation = true
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
