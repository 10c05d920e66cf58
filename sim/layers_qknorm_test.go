package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// Attention with QKNorm lowers as plain attention plus the two head norms. In fp32 on
// CUDA each norm keeps its input (pow saves it: the projection's output,
// which plain attention frees after rope), its rsqrt (one fp32 per head
// row) and the normalized tensor (saved by the weight multiply): per
// token, (2*head_dim + 1) * 4 bytes for each of the q heads and the kv
// heads. b=2, s=16, 4 heads, 2 kv heads, head_dim 32:
// 4 * 2*16 * (65*4 + 65*2) = 49,920 bytes more than plain attention.
func TestQKNormAttentionSaves(t *testing.T) {
	fp32, _ := core.LookupPrecision("fp32")
	rt, _ := core.LookupRuntime("cuda")
	saved := func(l core.Layer) int64 {
		m := &core.Model{Name: "attn", Layers: []core.Layer{l}, Loss: "none", InputDim: 128, InputGrad: true}
		rep, err := Evaluate(&core.Plan{Model: m, Batch: 2, Seq: 16, GradAccum: 1, Members: 1, Precision: fp32,
			Optimizer: core.Optimizer{Kind: core.SGD}, Runtime: rt, Device: hw.Device{Name: "test", Memory: 1 << 40}}, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return rep.SavedActivations
	}
	base := nn.Attention{Dim: 128, Heads: 4, KVHeads: 2, HeadDim: 32, Impl: "sdpa", Causal: true, Rope: true}
	plain, qk := base, base
	qk.QKNorm = true
	got := saved(&qk) - saved(&plain)
	if got != 49920 {
		t.Errorf("qk-norm saves %d bytes more than plain attention, want 49,920", got)
	}
	if p := qk.Params() - plain.Params(); p != 64 {
		t.Errorf("qk-norm adds %d parameters, want 2 x head_dim = 64", p)
	}
}

// Tensor parallelism splits the heads of a qk-norm attention as it does
// for plain attention; the norms' weights (head_dim each) are replicated.
func TestQKNormAttentionTP(t *testing.T) {
	m, err := hf.FromConfig([]byte(`{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "head_dim": 32}`), "flash")
	if err != nil {
		t.Fatal(err)
	}
	mixed, _ := core.LookupPrecision("bf16-mixed")
	rt, _ := core.LookupRuntime("cuda")
	for _, sp := range []bool{false, true} {
		plan := &core.Plan{Model: m, Batch: 2, Seq: 16, GradAccum: 1, Members: 1, Precision: mixed, Runtime: rt,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: hw.Device{Name: "test", Memory: 1 << 40},
			Parallel: core.Parallelism{TP: 2, SequenceParallel: sp}}
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			t.Fatalf("sp=%t: %v", sp, err)
		}
	}
}
