package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// LFM3's parameters, which transformers 5.25.0 counts on the meta device
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel, tied weights once; the first line of
// `/work/venv-t/bin/python tools/oracle/hf_defaults.py --only FILE`):
// lfm3-tiny.json 151,104; lfm3-defaults.json 1,728,801,536. The latter
// is Lfm3Config() written out (its defaults, the "LFM3-1.7B style
// configuration" of its docstring), the count transformers builds from
// it: LiquidAI/LFM3-1.7B's own config.json and model card are not
// reachable from here, so no published count is held.
func TestLFM3Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"lfm3-tiny.json":     151_104,
		"lfm3-defaults.json": 1_728_801_536,
	})
}

// What LFM3's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, causal-conv1d not installed):
// lfm3-tiny.json (64 wide, 4 heads of 16, 2 kv heads, w1/w3 160 wide,
// conv_L_cache 3, sliding_window 16, layer_types conv, sliding_attention,
// full_attention), 2 samples of 32 tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/lfm3-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// The conv layer keeps LFM2's; an attention layer Qwen3's, with q and k
// rotated in fp32 (the fp32 tables: each rotation's products save their
// fp32 operands) and the gate (g_proj's sigmoid, [tokens, 4], and the
// gated product o_proj saves), the window masking the sliding layer's
// keys past 16; the sandwich norms save their inputs. Without the gate
// memsh kept 17,408 bytes less at 2 and 3 layers in fp32, with bf16
// rotary tables 2,048 less a layer (each checked against these rows).
// Under full checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestLFM3SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "lfm3-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{544_004, 1_019_652, 1_470_724}},
		{"fp32", "eager", [3]int64{544_004, 1_043_204, 1_542_404}},
		{"bf16", "sdpa", [3]int64{346_884, 633_604, 908_036}},
		{"bf16", "eager", [3]int64{346_884, 677_636, 1_008_388}},
	})
}

// lfm3 under a release before models/lfm3 is refused, naming the
// release; the sandwich norms, the gate and the biases follow their
// keys; LFM2's legacy keys are not read (Lfm3Config has no such
// attributes); without layer_types, Lfm3Config's pattern; the module
// names are transformers'; what Lfm3Model cannot run is refused naming
// its key. Each edit's count is the one transformers 5.25.0 builds on
// the meta device from the edited file (151,104; 150,592; 150,720;
// 151,488; 151,424; 167,488; 151,104 three times; 155,104), the
// refusals what it fails on (an unknown layer type: KeyError in
// Lfm3Model.forward; flat rope_parameters: KeyError; yarn over half the
// head: a RuntimeError in apply_rotary_pos_emb; a null sliding_window: a
// ValueError making the mask; a null head_dim: Lfm3Config's validation).
func TestLFM3Config(t *testing.T) {
	tiny := string(readHF(t, "lfm3-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.22.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "lfm3" needs transformers 5.23 or later`) {
		t.Errorf("transformers 5.22.2: error %v, want one naming 5.23", err)
	}
	// A conv layer: in_proj 64 x 192, conv 64 x 3, out_proj 64 x 64; an
	// attention layer: q and o_proj 64 x 64, k and v 64 x 32, two norms
	// of 16, g_proj 64 x 4. Each layer: four norms of 64 and an MLP of
	// 3 x 64 x 160.
	const conv, attn, gate, ffn, embed = 64*192 + 64*3 + 64*64, 2*64*64 + 2*64*32 + 2*16 + 64*4, 64 * 4, 4*64 + 3*64*160, 256 * 64
	const all = conv + 2*attn + 3*ffn + embed + 64
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", all},
		{"no gate", `"use_attention_gate": true`, `"use_attention_gate": false`, all - 2*gate},
		{"no sandwich norms", `"use_sandwich_norm": true`, `"use_sandwich_norm": false`, all - 3*2*64},
		{"attention_bias", `"head_dim": 16`, `"head_dim": 16, "attention_bias": true`, all + 2*(64+32+32+64)},
		{"conv_bias", `"conv_bias": false`, `"conv_bias": true`, all + 192 + 64 + 64},
		{"untied", `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, all + embed},
		{"tie_embedding is not read", `"tie_word_embeddings": true`, `"tie_word_embeddings": true, "tie_embedding": false`, all},
		{"block_ff_dim is not read", `"intermediate_size": 160`, `"intermediate_size": 160, "block_ff_dim": 999, "block_auto_adjust_ff_dim": true`, all},
		{"full_attn_idxs is not read", `"head_dim": 16`, `"head_dim": 16, "full_attn_idxs": [0, 1, 2]`, all},
		{"Lfm3Config's layer pattern", `"layer_types": ["conv", "sliding_attention", "full_attention"],`, ``, 2*conv + attn + 3*ffn + embed + 64},
	})
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.conv.in_proj.weight", "model.layers.0.conv.conv.weight", "model.layers.0.conv.out_proj.weight",
		"model.layers.1.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight", "model.layers.2.self_attn.o_proj.weight",
		"model.layers.2.self_attn.g_proj.weight", "model.layers.0.feed_forward.w1.weight", "model.layers.0.feed_forward.w3.weight",
		"model.layers.0.feed_forward.w2.weight", "model.layers.0.operator_norm.weight", "model.layers.0.post_operator_norm.weight",
		"model.layers.0.ffn_norm.weight", "model.layers.0.post_ffn_norm.weight", "model.embedding_norm.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
	const types = `"layer_types": ["conv", "sliding_attention", "full_attention"]`
	const rope = `"rope_parameters": {
    "full_attention": {"partial_rotary_factor": 0.5, "rope_theta": 1000000.0, "rope_type": "proportional"},
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}
  }`
	checkEditedRefused(t, tiny, []configRefusal{
		{"an unknown layer type", types, `"layer_types": ["conv", "linear_attention", "full_attention"]`, `"layer_types" names a layer type Lfm3Model does not make`},
		{"a layer type short", types, `"layer_types": ["conv", "full_attention"]`, `"layer_types" must list one layer type per layer (3)`},
		{"flat rope_parameters", rope, `"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}`, `"rope_parameters" has no "full_attention" entry`},
		{"a narrowed table", `"rope_type": "proportional"`, `"rope_type": "yarn", "factor": 2.0`, `"rope_parameters" full_attention's partial_rotary_factor (0.5) with rope_type "yarn"`},
		{"no window", `"sliding_window": 16`, `"sliding_window": null`, `"sliding_window" must be a window size`},
		{"null head_dim", `"head_dim": 16`, `"head_dim": null`, `"head_dim" must be an integer`},
		{"kv heads", `"num_key_value_heads": 2`, `"num_key_value_heads": 3`, `"num_key_value_heads" (3) must divide the 4 attention heads`},
		{"conv_L_cache", `"conv_L_cache": 3`, `"conv_L_cache": 0`, `"conv_L_cache"`},
	})
}
