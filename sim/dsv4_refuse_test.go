package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What hf_config refuses for deepseek_v4, naming the key: a compress
// ratio DeepseekV4Config has no layer type for (its
// _COMPRESS_RATIO_TO_LAYER_TYPE knows 0, 4 and 128), too few layer types,
// an unknown MLP kind, scores other than sqrt-softplus, more than one kv
// head, output groups that do not divide the heads, a compress rate that
// is not a positive integer, and attention dropout (not modelled).
func TestDeepSeekV4Refuses(t *testing.T) {
	tiny := string(readHF(t, "deepseek-v4-tiny.json"))
	types := `"layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]`
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"compress_ratios", types, `"compress_ratios": [0, 8, 128]`, `"compress_ratios" layer 1 is 8: each must be 0 (sliding), 4 (compressed sparse) or 128 (heavily compressed)`},
		{"short layer_types", types, `"layer_types": ["sliding_attention"]`, `"layer_types" must list every one of the 3 layers`},
		{"layer type", types, `"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]`, `"layer_types" layer 1 is the string "full_attention"`},
		{"mlp_layer_types", `"mlp_layer_types": ["hash_moe", "moe", "moe"]`, `"mlp_layer_types": ["hash_moe", "dense", "moe"]`, `"mlp_layer_types" layer 1 is the string "dense": each must be "hash_moe" or "moe"`},
		{"scoring_func", `"scoring_func": "sqrtsoftplus"`, `"scoring_func": "softmax"`, `"scoring_func" must be "sqrtsoftplus" for model_type deepseek_v4 (got "softmax")`},
		{"num_key_value_heads", `"num_key_value_heads": 1`, `"num_key_value_heads": 2`, `"num_key_value_heads" must be 1 for model_type deepseek_v4`},
		{"o_groups", `"o_groups": 2`, `"o_groups": 3`, `"o_groups" (3) must divide num_attention_heads x head_dim (4 x 32)`},
		{"compress_rates", `"compressed_sparse_attention": 4`, `"compressed_sparse_attention": 0`, `"compress_rates" compressed_sparse_attention must be a positive integer (got 0)`},
		{"attention_dropout", `"scoring_func"`, `"attention_dropout": 0.1, "scoring_func"`, `"attention_dropout" must be 0 for model_type deepseek_v4`},
	} {
		cfg := strings.Replace(tiny, tc.from, tc.to, 1)
		if cfg == tiny {
			t.Fatalf("%s: %q not in the config", tc.name, tc.from)
		}
		_, err := hf.FromConfigOptions([]byte(cfg), hf.Options{Attn: "eager"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %s", tc.name, err, tc.want)
		}
	}
}

// Sequences shorter than a compressor's window make no compressed entry
// (the attention reads the sliding keys alone), and a sequence that is
// not a multiple of the rate drops its remainder: neither panics, and
// tensor parallelism is refused with the layer named.
func TestDeepSeekV4EdgeSequences(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "deepseek-v4-tiny.json"), hf.Options{Attn: "eager"})
	if err != nil {
		t.Fatal(err)
	}
	var prev int64
	for _, seq := range []int64{2, 7, 13, 32} {
		p := tinyPlan(t, m)
		p.Seq = seq
		got := evalPlan(t, p).SavedActivations
		if got <= prev {
			t.Errorf("seq %d keeps %d bytes, no more than a shorter sequence's %d", seq, got, prev)
		}
		prev = got
	}
	p := tinyPlan(t, m)
	p.Parallel = core.Parallelism{TP: 2}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "tensor or context parallelism") {
		t.Errorf("tp=2: got %v, want the refusal of tensor parallelism", err)
	}
}
