package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Persimmon's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, loaded by from_pretrained):
// persimmon-tiny.json (64 wide, 4 heads of 16, q_layernorm and
// k_layernorm over the heads, half of each head rotated, relu2 MLPs of
// 96, 3 layers), 2 samples of 32 tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/persimmon-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// The q and k norms save query_key_value's whole output (they read its
// strided views in place), their mean and rstd. param_bytes and
// grad_bytes at 3 layers: 418,944 in fp32 (104,736 parameters).
func TestPersimmonSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "persimmon-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{304_644, 540_164, 775_684}},
		{"fp32", "eager", [3]int64{336_388, 603_652, 870_916}},
		{"bf16", "sdpa", [3]int64{169_732, 288_004, 406_276}},
		{"bf16", "eager", [3]int64{217_860, 384_260, 550_660}},
	})
}

// Without qk_layernorm, and with rope_parameters' partial_rotary_factor
// 0.25 (the one transformers keeps): persimmon-tiny.json so edited
// (/tmp/routed_s36_u2/persimmon-noln.json), fp32, sdpa:
//
//	python tools/oracle/hf_block_saved.py /tmp/routed_s36_u2/persimmon-noln.json {1,2} 2 32 float32 sdpa nocache
//
// keeps 299,524 and 530,948 bytes (param_bytes 300,800 at 2 layers).
func TestPersimmonNoQKNormAsTransformers(t *testing.T) {
	edit := func(c map[string]any) {
		c["qk_layernorm"] = false
		delete(c, "partial_rotary_factor")
		c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 25000.0, "partial_rotary_factor": 0.25}
	}
	for i, want := range [2]int64{299_524, 530_948} {
		c := editConfig(t, "persimmon-tiny.json", func(c map[string]any) { edit(c); c["num_hidden_layers"] = i + 1 })
		p := hfOraclePlan(t, c, hf.Options{Attn: "sdpa"}, "fp32")
		if got := evalPlan(t, p).SavedActivations; got != want {
			t.Errorf("%d layers: memsh keeps %d bytes, transformers %d (%+d)", i+1, got, want, got-want)
		}
	}
}

// The parameters: persimmon-tiny.json 104,736 (the harness's fp32
// param_bytes / 4); PersimmonConfig()'s defaults 9,397,175,296 (36 layers
// of 4096, 64 heads, relu2 MLPs of 16,384, 262,144 untied embeddings; the
// model card's "8B" counts without the embeddings and head: 9,397,175,296
// - 2 x 262,144 x 4096 = 7,249,691,648), on the meta device,
// transformers 5.25.0:
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AutoModelForCausalLM.from_config(t.PersimmonConfig()).parameters()))"
func TestPersimmonParams(t *testing.T) {
	checkParams(t, map[string]int64{"persimmon-tiny.json": 104_736})
	m, err := hf.FromConfig([]byte(`{"model_type": "persimmon", "vocab_size": 262144, "hidden_size": 4096,
 "intermediate_size": 16384, "num_hidden_layers": 36, "num_attention_heads": 64}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 9_397_175_296 {
		t.Errorf("PersimmonConfig's defaults: %d parameters, want 9,397,175,296", got)
	}
}

// persimmon before 4.53 is refused with its reason (no SDPA path, eager
// attention only); a rotated part transformers cannot broadcast and two
// partial_rotary_factors that differ are refused naming the key; the
// names are transformers'.
func TestPersimmonConfig(t *testing.T) {
	tiny := string(readHF(t, "persimmon-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.52.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "persimmon" needs transformers 4.53 or later`) {
		t.Errorf("transformers 4.52.4: error %v, want one naming 4.53", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.53.0"}); err != nil {
		t.Errorf("transformers 4.53.0: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"odd rotated part", `"partial_rotary_factor": 0.5`, `"partial_rotary_factor": 0.3125`, `"partial_rotary_factor" must turn an even number`},
		{"two factors", `"partial_rotary_factor": 0.5`, `"partial_rotary_factor": 0.5, "rope_parameters": {"partial_rotary_factor": 0.25}`, `"partial_rotary_factor" (0.5) and rope_parameters' (0.25) differ`},
		{"heads not dividing", `"num_attention_heads": 4`, `"num_attention_heads": 5`, `"num_attention_heads" must divide hidden_size`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %s", tc.name, err, tc.want)
		}
	}
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.0.self_attn.query_key_value.bias",
		"model.layers.0.self_attn.q_layernorm.weight", "model.layers.0.self_attn.k_layernorm.bias",
		"model.layers.0.self_attn.dense.weight", "model.layers.2.mlp.dense_h_to_4h.bias",
		"model.layers.2.post_attention_layernorm.bias", "model.final_layernorm.weight", "lm_head.weight")
}
