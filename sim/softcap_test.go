package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
)

// Gemma 2's soft-capping keeps tanh's output for backward: over the
// logits always, over the attention scores with eager attention only.
// A 2-layer Gemma 2 (hidden 64, 4 heads of 32, vocab 100) at batch 1, seq
// 16, pure bf16: the logits' tanh is [1, 16, 100] x 2 B = 3,200 B; each
// layer's eager score tanh is [1, 4, 16, 16] x 2 B = 2,048 B.
func TestGemma2Softcap(t *testing.T) {
	const base = `{"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "head_dim": 32`
	saved := func(extra, attn string) int64 {
		t.Helper()
		m, err := hf.FromConfig([]byte(base+extra+"}"), attn)
		if err != nil {
			t.Fatal(err)
		}
		prec, _ := core.LookupPrecision("bf16")
		dev, _ := hw.LookupDevice("H100-80GB")
		rt, _ := core.LookupRuntime("cuda")
		p := &core.Plan{Model: m, Batch: 1, Seq: 16, GradAccum: 1, Members: 1, Precision: prec,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Runtime: rt, Phase: core.Train}
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r.SavedActivations
	}
	off := `, "final_logit_softcapping": null, "attn_logit_softcapping": null`
	for _, c := range []struct {
		name, extra, attn string
		want              int64
	}{
		{"defaults (30, 50), eager", "", "eager", 3200 + 2*2048},
		{"defaults, flash: the kernel caps the scores", "", "flash", 3200},
		{"logits only", `, "attn_logit_softcapping": null`, "eager", 3200},
		{"scores only", `, "final_logit_softcapping": null`, "eager", 2 * 2048},
	} {
		if got := saved(c.extra, c.attn) - saved(off, c.attn); got != c.want {
			t.Errorf("%s: soft-capping keeps %d more bytes, want %d", c.name, got, c.want)
		}
	}
	_, err := hf.FromConfig([]byte(base+`, "final_logit_softcapping": -1}`), "eager")
	if err == nil || !strings.Contains(err.Error(), "final_logit_softcapping") || !strings.Contains(err.Error(), "positive number or null") {
		t.Errorf("a negative cap: error %v", err)
	}
}
