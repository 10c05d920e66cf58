// Package testmodels builds the small and large models that tests and
// benchmarks of several sim packages share.
package testmodels

import (
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/hw"
)

// Llama builds a Llama-style decoder (RMSNorm, rotary GQA attention,
// SwiGLU MLP, untied head).
func Llama(hidden, layers, heads, kv, ffn, vocab int64, impl string) *sim.Model {
	block := &sim.Sequential{Layers: []sim.Layer{
		&sim.Residual{Layer: &sim.Sequential{Layers: []sim.Layer{
			&sim.Norm{Name: "input_layernorm", Dim: hidden, RMS: true},
			&sim.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, Impl: impl, Causal: true, Rope: true, SoftmaxFP32: true},
		}}},
		&sim.Residual{Layer: &sim.Sequential{Layers: []sim.Layer{
			&sim.Norm{Name: "post_attention_layernorm", Dim: hidden, RMS: true},
			&sim.MLP{Dim: hidden, Hidden: ffn, Act: "swiglu"},
		}}},
	}}
	return &sim.Model{
		Name: "llama",
		Layers: []sim.Layer{
			&sim.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
			&sim.Repeat{Name: "layers", Layer: block, N: layers},
			&sim.Norm{Name: "norm", Dim: hidden, RMS: true},
		},
		Vocab: vocab, Loss: "cross_entropy", LogitsFP32: true,
	}
}

// LlamaPlan is a one-GPU training plan of m with AdamW.
func LlamaPlan(m *sim.Model, batch, seq int64, precision, ckpt string, dev string) *sim.Plan {
	p, _ := sim.LookupPrecision(precision)
	c, _ := sim.ParseCheckpoint(ckpt)
	d, _ := hw.LookupDevice(dev)
	rt, _ := sim.LookupRuntime("cuda")
	return &sim.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: 1, Members: 1, Precision: p,
		Optimizer: sim.Optimizer{Kind: "adamw"}, Checkpoint: c, Device: d, Runtime: rt}
}
