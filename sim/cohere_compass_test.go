package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// The text model of Cohere's North-Micro-Vision on the meta device
// (transformers 5.25.0, torch 2.15.0; hf_block_saved.py's param_bytes / 4
// at 3 layers): cohere_compass_text-tiny.json 127,232 (64 wide, 4 heads
// of 16 over 2 kv heads, MLP 128, vocab 256 tied; two sliding layers with
// the rope and a full one without); cohere_compass_text-defaults.json
// 34,980,831,232, CohereCompassTextConfig()'s defaults (40 layers of 8192,
// 64 heads of 128, MLP 22,528, 256,000 tied embeddings, every layer full)
// with rope_parameters given for its full_attention layers, without which
// transformers cannot build the class (the rotary embedding reads
// rope_parameters["full_attention"] of the default {}: a KeyError); the
// hub's CohereLabs/North-Micro-Vision-Instruct config.json was not at
// hand.
func TestCohereCompassParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"cohere_compass_text-tiny.json":     508_928 / 4,
		"cohere_compass_text-defaults.json": 34_980_831_232,
	})
}

// What the text model keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast), 2 samples of 32 tokens, LAYERS
// its first layers (layer_types cut):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/cohere_compass_text-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// fp32 sdpa 412,164 / 683,780 / 930,820, eager 435,716 / 730,884 /
// 1,026,052; bf16 sdpa 289,796 / 451,076 / 600,068, eager 333,828 /
// 539,140 / 744,452. The rotary tables are [2, 32, 16] a layer type
// (batch-wide: position_ids expanded over M-RoPE's axes and the batch),
// which the rope's products keep; the sliding layers get a mask under
// SDPA (window 16 < 32 tokens), the full one none.
func TestCohereCompassSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "cohere_compass_text-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{412_164, 683_780, 930_820}},
		{"fp32", "eager", [3]int64{435_716, 730_884, 1_026_052}},
		{"bf16", "sdpa", [3]int64{289_796, 451_076, 600_068}},
		{"bf16", "eager", [3]int64{333_828, 539_140, 744_452}},
	})
}

// cohere_compass_text under 5.16 is refused (models/cohere_compass came
// with 5.16.0); the parameter counts of edits of the tiny file are
// transformers 5.25.0's on the meta device: a head_dim in config.json
// replaces hidden_size // num_attention_heads (164,096 at 32), the kv heads
// default to the heads (139,520), attention_bias biases q, k, v and o
// (127,808), an untied head (143,616). rope_parameters without an entry
// for a layer type the layers use is refused as transformers fails on it
// (a KeyError): left out, flat, or missing a type.
func TestCohereCompassConfig(t *testing.T) {
	tiny := string(readHF(t, "cohere_compass_text-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.15.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "cohere_compass_text" needs transformers 5.16 or later`) {
		t.Errorf("transformers 5.15.0: error %v, want one naming 5.16", err)
	}
	checkEditedParams(t, tiny, []configEdit{
		{"head_dim", `"hidden_size": 64,`, `"hidden_size": 64, "head_dim": 32,`, 164_096},
		{"kv heads", `"num_key_value_heads": 2,`, ``, 139_520},
		{"attention_bias", `"hidden_size": 64,`, `"hidden_size": 64, "attention_bias": true,`, 127_808},
		{"untied", `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 143_616},
	})
	rope := `"rope_parameters": {
    "full_attention": null,
    "sliding_attention": {"mrope_section": [4, 2, 2], "rope_theta": 50000.0, "rope_type": "default"}
  },`
	checkEditedRefused(t, tiny, []configRefusal{
		{"no rope_parameters", rope, ``, "rope_parameters"},
		{"flat rope_parameters", rope, `"rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},`, "rope_parameters"},
		{"no full entry", `"full_attention": null,`, ``, "rope_parameters"},
		{"layer type", `"sliding_attention", "sliding_attention", "full_attention"]`, `"sliding_attention", "chunked_attention", "full_attention"]`, "layer_types"},
		{"logit_scale", `"logit_scale": 0.25`, `"logit_scale": 0`, "logit_scale"},
	})
}

// cohere_compass_text-tiny-rope.json rotates every layer (full layers
// with their own rope_theta), biases the projections, leaves the kv heads
// and logit_scale out (4 heads, no scale):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/cohere_compass_text-tiny-rope.json {1,2,3} 2 32 {float32 sdpa,bfloat16 eager} nocache
//
// fp32 sdpa 403,972 / 683,780 / 947,204, bf16 eager 333,828 / 543,236 /
// 748,548. With every layer checkpointed (use_reentrant=False), the first
// file, fp32 sdpa:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/cohere_compass_text-tiny.json {1,2,3} 2 32 float32 sdpa nocache ckpt held
//
// 148,740 / 165,124 / 181,508: each layer's input (16,384 bytes) besides
// the final norm's and the loss's; held, 9,472 bytes: the sliding layers'
// bool mask (1,024), the position_ids the layers get from 5.25 (256) and
// the sliding type's cos and sin (4,096 each).
func TestCohereCompassVariantsAsTransformers(t *testing.T) {
	checkSavedDepths(t, "cohere_compass_text-tiny-rope.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{403_972, 683_780, 947_204}},
		{"bf16", "eager", [3]int64{333_828, 543_236, 748_548}},
	})
	for i, want := range []int64{148_740, 165_124, 181_508} {
		p := hfSavedPlan(t, "cohere_compass_text-tiny.json", i+1, "fp32", hf.Options{Attn: "sdpa"}, true)
		p.NoAttentionMask = true // the harness passes none: the sliding mask is one [1, 1, seq, seq] storage expanded over the batch
		if got := evalPlan(t, p).SavedActivations; got != want+9472 {
			t.Errorf("checkpointed, %d layers: %d saved, want %d (%+d)", i+1, got, want+9472, got-want-9472)
		}
	}
}
