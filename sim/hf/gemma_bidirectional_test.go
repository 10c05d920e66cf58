package hf

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// embeddingGemma300M is google/embeddinggemma-300m's config.json (a
// Gemma3TextModel trained as a bidirectional encoder).
const embeddingGemma300M = `{
  "_sliding_window_pattern": 6, "architectures": ["Gemma3TextModel"], "attention_bias": false,
  "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 2, "dtype": "float32",
  "eos_token_id": 1, "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 1152,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
    "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
    "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
    "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 2048, "model_type": "gemma3_text", "num_attention_heads": 3, "num_hidden_layers": 24,
  "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000.0, "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": 512,
  "transformers_version": "4.57.0.dev0", "use_bidirectional_attention": true, "use_cache": true, "vocab_size": 262144
}`

// withTestKey returns testdata/hf's file with key (in text_config when sub)
// set to v.
func withTestKey(t *testing.T, file string, sub bool, key string, v any) []byte {
	t.Helper()
	data, err := os.ReadFile("../testdata/hf/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	obj := raw
	if sub {
		obj = raw["text_config"].(map[string]any)
	}
	obj[key] = v
	out, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGemmaBidirectional: use_bidirectional_attention true (EmbeddingGemma)
// is refused from the release whose Gemma attention reads it
// (bidirectionalSince), never built causal without a word; earlier
// releases ignore it and build the causal model, as memsh does. Built
// causal, EmbeddingGemma-300M has 302,863,104 parameters: its model
// card's 307,581,696 (sentence-transformers) less the two Dense
// projections after the pooling, 2 x 768 x 3072 = 4,718,592. VaultGemma's
// attention is causal whatever the key says.
func TestGemmaBidirectional(t *testing.T) {
	const refused = `is true: bidirectional attention (EmbeddingGemma's encoder) is not modelled`
	for _, tc := range []struct {
		name, transformers string
		data               []byte
		want               string // the error's words, "" for a model
	}{
		{"embeddinggemma default", "", []byte(embeddingGemma300M), `"use_bidirectional_attention" ` + refused},
		{"embeddinggemma 4.57.1", "4.57.1", []byte(embeddingGemma300M), refused},
		{"embeddinggemma 4.56.2", "4.56.2", []byte(embeddingGemma300M), ""},
		{"embeddinggemma false", "", []byte(strings.Replace(embeddingGemma300M, `"use_bidirectional_attention": true`, `"use_bidirectional_attention": false`, 1)), ""},
		{"gemma 5.0", "5.0.0", withTestKey(t, "gemma-tiny.json", false, "use_bidirectional_attention", true), refused},
		{"gemma 4.57.1", "4.57.1", withTestKey(t, "gemma-tiny.json", false, "use_bidirectional_attention", true), ""},
		{"gemma2 default", "", withTestKey(t, "gemma2-tiny.json", false, "use_bidirectional_attention", true), refused},
		{"gemma2 null", "", withTestKey(t, "gemma2-tiny.json", false, "use_bidirectional_attention", nil), ""},
		{"gemma3 text_config", "", withTestKey(t, "gemma3-vl-tiny.json", true, "use_bidirectional_attention", true), `"text_config.use_bidirectional_attention" ` + refused},
		{"vaultgemma", "", withTestKey(t, "vaultgemma-tiny.json", false, "use_bidirectional_attention", true), ""},
	} {
		m, err := FromConfigOptions(tc.data, Options{Attn: "sdpa", Transformers: tc.transformers})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %s", tc.name, err, tc.want)
		case tc.name == "embeddinggemma 4.56.2" && m.Params() != 302_863_104:
			t.Errorf("%s: %d parameters, want 302,863,104", tc.name, m.Params())
		}
	}
}
