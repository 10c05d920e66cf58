package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Helium's parameters on the meta device (transformers 5.25.0):
// helium-tiny.json 106,816 (64 wide, 4 heads of 16, 2 kv heads, MLP 128,
// untied); helium-1-preview-2b.json 2,172,643,840, the published
// config.json (as mlx-community/helium-1-preview-2b-4bit copies it field
// for field: 2560 wide, 24 layers, 20 heads of 128, MLP 7040, vocab
// 48000), the card's 2B.
func TestHeliumParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"helium-tiny.json":         106_816,
		"helium-1-preview-2b.json": 2_172_643_840,
	})
}

// What Helium's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): helium-tiny.json, 2
// samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/helium-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's layer whose norms keep their fp32 rows (the weight applied
// before the cast back) and whose rope pairs adjacent dimensions on a cos
// and sin each layer repeat_interleaves.
func TestHeliumSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"helium-tiny.json", "fp32", "sdpa", 400_132, 684_292},
		{"helium-tiny.json", "fp32", "eager", 448_260, 780_548},
		{"helium-tiny.json", "bf16", "sdpa", 284_164, 460_292},
		{"helium-tiny.json", "bf16", "eager", 340_484, 572_932},
	})
}

// helium under 4.48 is refused (added to transformers on 2025-01-13,
// after 4.48.0); attention_bias biases q, k and v but never o_proj; a
// head_dim whose heads are not hidden_size wide is refused (o_proj reads
// hidden_size inputs).
func TestHeliumConfig(t *testing.T) {
	tiny := string(readHF(t, "helium-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.48.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "helium" needs transformers 4.49 or later`) {
		t.Errorf("transformers 4.48.3: error %v, want one naming 4.49", err)
	}
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"attention_bias": false`, `"attention_bias": true`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(106_816+2*(64+32+32)); got != want {
		t.Errorf("attention_bias: %d parameters, want %d (q, k, v biased, o_proj not)", got, want)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"head_dim": 16`, `"head_dim": 8`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"head_dim" times num_attention_heads must be hidden_size`) {
		t.Errorf("head_dim 8: error %v", err)
	}
}
