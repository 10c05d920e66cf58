package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// DiffLlama's parameters on the meta device (transformers 5.25.0, torch
// 2.15.0): diffllama-tiny.json 106,944 (64 wide, 4 heads of 16 over 2
// kv heads, MLP 128, untied; a layer 37,056, of which lambda_q1,
// lambda_k1, lambda_q2 and lambda_k2 are 4 x 16); with attention_bias
// 107,328, tied 90,560, 4 kv heads 115,136; diffllama-defaults.json
// 1,204,885,504, DiffLlamaConfig()'s defaults (16 x 2048, 32 heads of 64,
// MLP 8192, 32,000 untied embeddings), whose docstring names
// kajuma/DiffLlama-0.3B-handcut (its config.json was not at hand).
func TestDiffLlamaParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"diffllama-tiny.json":     106_944,
		"diffllama-defaults.json": 1_204_885_504,
	})
	tiny := string(readHF(t, "diffllama-tiny.json"))
	for _, tc := range []struct {
		from, to string
		want     int64
	}{
		{`"attention_bias": false`, `"attention_bias": true`, 107_328},
		{`"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 90_560},
		{`"num_key_value_heads": 2`, `"num_key_value_heads": 4`, 115_136},
	} {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err != nil || m.Params() != tc.want {
			t.Errorf("%s: %v, %v parameters, want %d", tc.to, err, m, tc.want)
		}
	}
}

// What DiffLlama's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast): diffllama-tiny.json, 2
// samples of 32 tokens, 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/diffllama-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// fp32 sdpa 491,792 / 863,516 / 1,235,240, eager 579,856 / 1,039,644 /
// 1,499,432; bf16 sdpa 313,614 / 525,592 / 737,570, eager 422,158 /
// 742,680 / 1,063,202. A layer's attention keeps the rotated q and k once,
// each call's copy of its v half (SDPA: its output and logsumexp, the kv
// heads grouped; eager: repeat_kv's copies of k and of its v half and the
// fp32 probabilities), the two fp32 exp(λq · λk), λ (q's dtype), the
// calls' concatenated outputs (the product's view), the group norm's fp32
// input and rsqrt per head pair, and o_proj's input. param_bytes and
// grad_bytes at 3 layers: fp32 576,000, bf16 288,000.
func TestDiffLlamaSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "diffllama-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{491_792, 863_516, 1_235_240}},
		{"fp32", "eager", [3]int64{579_856, 1_039_644, 1_499_432}},
		{"bf16", "sdpa", [3]int64{313_614, 525_592, 737_570}},
		{"bf16", "eager", [3]int64{422_158, 742_680, 1_063_202}},
	})
	for _, tc := range []struct {
		precision     string
		params, grads int64
	}{{"fp32", 576_000, 576_000}, {"bf16", 288_000, 288_000}} {
		r := evalPlan(t, hfSavedPlan(t, "diffllama-tiny.json", 3, tc.precision, hf.Options{Attn: "sdpa"}, false))
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d and %d", tc.precision, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// diffllama under 5.13 is refused (5.12.0's DiffLlamaAttention runs one
// attention over v's halves concatenated; 5.13.0's two calls are
// 5.25.0's); what DiffLlamaAttention raises on (attention dropout, an odd
// number of kv heads) is refused naming the key.
func TestDiffLlamaConfig(t *testing.T) {
	tiny := string(readHF(t, "diffllama-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.12.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "diffllama" needs transformers 5.13 or later`) {
		t.Errorf("transformers 5.12.0: error %v, want one naming 5.13", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"attention_dropout": 0.0`, `"attention_dropout": 0.1`, `"attention_dropout" must be 0`},
		{`"num_key_value_heads": 2`, `"num_key_value_heads": 1`, `"num_key_value_heads" (1 kv heads) must be even`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.to, err, tc.want)
		}
	}
	// Without num_key_value_heads the kv heads are the 4 heads: even.
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"num_key_value_heads": 2,`, ``, 1)), "sdpa"); err != nil {
		t.Errorf("without num_key_value_heads: %v", err)
	}
	// Tensor parallelism would split the head pairs the group norm joins.
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Parallel = core.Parallelism{TP: 2}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "not modelled for DiffLlama's differential attention") {
		t.Errorf("tp=2: got %v, want the refusal", err)
	}
}
