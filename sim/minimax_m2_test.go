package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// MiniMax-M2's parameters: 228,689,748,992 (the card's "230 billion
// total"), which transformers 5.25.0 counts on the meta device for
// minimax-m2.json (the published config.json's sizes: 62 layers of 3072,
// 48 heads and 8 kv heads of 128, rotary_dim 64, 256 experts of 1536, 8
// a token, 200,064 untied embeddings; its 3 MTP modules are not built).
// minimax_m2-tiny.json: 181,952.
func TestMiniMaxM2Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"minimax-m2.json":      228_689_748_992,
		"minimax_m2-tiny.json": 181_952,
	})
}

// What MiniMax-M2's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): minimax_m2-tiny.json (64 wide, 4 heads and 2 kv heads
// of 32, rotary_dim 16, 8 experts of 32, 2 a token), 2 samples of 32
// tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minimax_m2-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// q_norm and k_norm over the whole projections (128 and 64 wide), the
// partial rope's cat, and the router's sigmoid over its bf16 logits cast
// to fp32: fp32 scores and top-k weights in bf16.
func TestMiniMaxM2SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"minimax_m2-tiny.json", "fp32", "sdpa", 588_324, 1_056_580},
		{"minimax_m2-tiny.json", "fp32", "eager", 620_068, 1_120_068},
		{"minimax_m2-tiny.json", "bf16", "sdpa", 381_476, 661_316},
		{"minimax_m2-tiny.json", "bf16", "eager", 429_604, 757_572},
	})
}

// minimax_m2 under 4.57.6 is refused (models/minimax_m2 came with 5.0);
// router_jitter_noise above 0 is refused (its in-place noise is not
// modelled); rotary_dim, else partial_rotary_factor, sizes the rope; the
// names are transformers'.
func TestMiniMaxM2Config(t *testing.T) {
	tiny := string(readHF(t, "minimax_m2-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.57.6"})
	if err == nil || !strings.Contains(err.Error(), `model_type "minimax_m2" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.6: error %v, want one naming 5.0", err)
	}
	for _, tc := range []struct{ old, new, err string }{
		{`"router_jitter_noise": 0.0`, `"router_jitter_noise": 0.01`, `"router_jitter_noise" = 0.01 is not modelled`},
		{`"rotary_dim": 16`, `"rotary_dim": 33`, `"rotary_dim" (33) must be at most head_dim (32)`},
		{`"rotary_dim": 16`, `"partial_rotary_factor": 1.5`, `"partial_rotary_factor" must be in (0, 1] (got 1.5)`},
	} {
		if _, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.old, tc.new, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.err)
		}
	}
	checkHasParams(t, tiny, "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
		"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj", "lm_head.weight")
}
