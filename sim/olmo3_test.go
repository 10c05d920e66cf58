package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// OLMo 3's parameter counts: allenai/Olmo-3-1025-7B 7,298,011,136 and
// Olmo-3-1125-32B 32,233,522,176 (the totals public model lists quote;
// the hub is not reachable from here). The config files carry the
// published fields (4096 wide, 32 layers of 32 heads, intermediate 11008;
// 5120 wide, 64 layers of 40 heads and 8 kv heads, intermediate 27648;
// vocab 100,278, untied; three sliding layers of 4096 in four, yarn on the
// full ones), and transformers 5.25.0 counts the same on the meta device
// (AutoModelForCausalLM.from_config under torch.device("meta"), torch
// 2.15.0). olmo3-tiny.json: 107,008 there too.
func TestOlmo3Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"olmo-3-1025-7b.json":  7_298_011_136,
		"olmo-3-1125-32b.json": 32_233_522_176,
		"olmo3-tiny.json":      107_008,
	})
}

// What OLMo 3 keeps for backward, against transformers 5.25.0 on PyTorch
// 2.15.0 (/work/venv-t, the CPU, no autocast): olmo3-tiny.json (olmo2-tiny
// with layer_types sliding then full, sliding_window 16), 2 samples of 32
// tokens, 1 layer (the sliding one) and 2; olmo3-tiny-full.json is the
// same with every layer full_attention (under sdpa 28,672 bytes less at 2
// layers in fp32: the sliding layer's bias, (2, 1, 32, 32), 8,192; its
// rotary pair, two (1, 1, 32, 16), 4,096; and repeat_kv's k and v, two
// (2, 4, 32, 16), which SDPA given a mask reads, in place of the kv
// heads' two (2, 2, 32, 16), +16,384; per hf_block_saved.py's v listing):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/olmo3-tiny{,-full}.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
func TestOlmo3SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"olmo3-tiny.json", "fp32", "sdpa", 474_372, 808_196},
		{"olmo3-tiny.json", "fp32", "eager", 497_924, 879_876},
		{"olmo3-tiny.json", "bf16", "sdpa", 347_396, 574_724},
		{"olmo3-tiny.json", "bf16", "eager", 391_428, 675_076},
		{"olmo3-tiny-full.json", "fp32", "sdpa", 449_796, 779_524},
		{"olmo3-tiny-full.json", "bf16", "sdpa", 335_108, 558_340},
	})
}

// The 7B's layer_types is Olmo3Config's default pattern (three sliding
// layers of 4096 in four): the file without the list builds the same
// step. At 8,192 tokens, past the window, SDPA (which has no window) gets
// the sliding layers' mask as an additive bias that its kernel keeps,
// [1, 1, 8192, 8192] in bf16 each (nn.Attention.windowMasked): the 24
// sliding layers keep those 24 biases more than the file with every
// layer full_attention, which runs is_causal without a mask, and one
// rotary pair more, 8,388,608 bytes: Olmo3Model makes a cos and sin a
// layer type (rotary_embs, the sliding layers' without yarn), [1, 8192,
// 128] fp32 each, which the sliding layers' apply_rotary_pos_emb saves;
// with every layer full the sliding pair is made and dropped (7B has as
// many kv heads as heads: no repeat_kv copies under the mask). At 2 x 32
// tokens against transformers: olmo3-tiny-full.json in
// TestOlmo3SavesAsTransformers.
func TestOlmo3DefaultLayerTypes(t *testing.T) {
	saved := func(set map[string]any) int64 {
		cfg := readHF(t, "olmo-3-1025-7b.json")
		if set != nil {
			cfg = ropeConfig(t, "olmo-3-1025-7b.json", 32, set)
		}
		m, err := hf.FromConfig(cfg, "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Seq = 8192
		return evalPlan(t, p).SavedActivations
	}
	full := make([]any, 32)
	for i := range full {
		full[i] = "full_attention"
	}
	file, byDefault, allFull := saved(nil), saved(map[string]any{"layer_types": nil}), saved(map[string]any{"layer_types": full})
	if byDefault != file {
		t.Errorf("without layer_types: %d saved, the file's list %d", byDefault, file)
	}
	const bias, ropePair = 8192 * 8192 * 2, 2 * 8192 * 128 * 4
	if file-allFull != 24*bias+ropePair {
		t.Errorf("three sliding layers in four keep %d bytes, every layer full %d: want 24 biases (%d) and a rotary pair (%d) more", file, allFull, 24*bias, ropePair)
	}
}
