package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// StableLM's parameters on the meta device (transformers 5.25.0):
// stablelm-tiny.json 107,392 (64 wide, 4 heads of 16, 2 kv heads, MLP
// 128, use_qkv_bias, untied), stablelm-tiny-parallel.json 107,136 (no
// post_attention_layernorm: 2 x (64 + 64) fewer); stablelm-2-1_6b.json
// 1,644,515,328 for the published sizes (2048 wide, 24 layers, 32 heads,
// MLP 5632, vocab 100352, use_qkv_bias). The card lists 1,644,417,024,
// 98,304 (48 x 2048) fewer than transformers builds.
func TestStableLMParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"stablelm-tiny.json":          107_392,
		"stablelm-tiny-parallel.json": 107_136,
		"stablelm-2-1_6b.json":        1_644_515_328,
	})
}

// What StableLM's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/stablelm-tiny{,-parallel}.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// LayerNorms with biases, a rope on the first quarter of each head (the
// rest cat back), Llama's MLP; use_parallel_residual runs attention and
// MLP on one norm's output.
func TestStableLMSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"stablelm-tiny.json", "fp32", "sdpa", 365_060, 629_252},
		{"stablelm-tiny.json", "fp32", "eager", 396_804, 692_740},
		{"stablelm-tiny.json", "bf16", "sdpa", 216_324, 348_932},
		{"stablelm-tiny.json", "bf16", "eager", 264_452, 445_188},
		{"stablelm-tiny-parallel.json", "fp32", "sdpa", 331_780, 562_692},
		{"stablelm-tiny-parallel.json", "fp32", "eager", 363_524, 626_180},
		{"stablelm-tiny-parallel.json", "bf16", "sdpa", 199_684, 315_652},
		{"stablelm-tiny-parallel.json", "bf16", "eager", 247_812, 411_908},
	})
}

// stablelm under 4.38 is refused: the 4.38.0 wheel is the first with
// models/stablelm (4.37.2 has none; 4.38.0, 4.38.2, 4.39.3 and 4.40.0
// checked). 4.38 and 4.39 have no StableLmSdpaAttention, so attn="sdpa"
// runs eager, and no use_parallel_residual, which is refused there;
// qk_layernorm is refused naming the key; use_qkv_bias biases q, k and v
// only.
func TestStableLMConfig(t *testing.T) {
	tiny := string(readHF(t, "stablelm-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.37.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "stablelm" needs transformers 4.38 or later`) {
		t.Errorf("transformers 4.37.2: error %v, want one naming 4.38", err)
	}
	for _, seq := range []int64{16, 64} {
		sdpa := cpuSaved(t, "stablelm-tiny.json", hf.Options{Attn: "sdpa", Transformers: "4.39.3"}, 1, seq)
		eager := cpuSaved(t, "stablelm-tiny.json", hf.Options{Attn: "eager", Transformers: "4.39.3"}, 1, seq)
		if now := cpuSaved(t, "stablelm-tiny.json", hf.Options{Attn: "sdpa", Transformers: "4.40.0"}, 1, seq); sdpa != eager || now == eager {
			t.Errorf("%d tokens: 4.39.3 sdpa keeps %d bytes, eager %d (want the same); 4.40.0 sdpa %d (want another)", seq, sdpa, eager, now)
		}
	}
	parallel := readHF(t, "stablelm-tiny-parallel.json")
	_, err = hf.FromConfigOptions(parallel, hf.Options{Attn: "eager", Transformers: "4.39.3"})
	if err == nil || !strings.Contains(err.Error(), `"use_parallel_residual" needs transformers 4.40 or later`) {
		t.Errorf("use_parallel_residual under 4.39.3: error %v, want one naming 4.40", err)
	}
	if _, err := hf.FromConfigOptions(parallel, hf.Options{Attn: "eager", Transformers: "4.40.0"}); err != nil {
		t.Errorf("use_parallel_residual under 4.40.0: %v", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"qk_layernorm": false`, `"qk_layernorm": true`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"qk_layernorm" is not modelled yet`) {
		t.Errorf("qk_layernorm: error %v", err)
	}
	m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"use_qkv_bias": true`, `"use_qkv_bias": false`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(107_392-2*(64+32+32)); got != want {
		t.Errorf("use_qkv_bias false: %d parameters, want %d", got, want)
	}
}
