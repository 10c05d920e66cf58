package testmodels

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// Llama builds a Llama-style decoder (RMSNorm, rotary GQA attention,
// SwiGLU MLP, untied head).
func Llama(hidden, layers, heads, kv, ffn, vocab int64, impl string) *core.Model {
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

// LlamaPlan is a one-GPU training plan of m with AdamW.
func LlamaPlan(m *core.Model, batch, seq int64, precision, ckpt string, dev string) *core.Plan {
	p, _ := core.LookupPrecision(precision)
	c, _ := core.ParseCheckpoint(ckpt)
	d, _ := hw.LookupDevice(dev)
	rt, _ := core.LookupRuntime("cuda")
	return &core.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: 1, Members: 1, Precision: p,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: c, Device: d, Runtime: rt}
}
