package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Dots 3 Note's text layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, loaded by from_pretrained):
// dots3_note-tiny.json (64 wide; layer 0 a sliding layer of 2 heads, q
// latent 24, kv latent 12, qk 10 + 6, v 16, window 8, with a dense MLP
// of 96; layer 1 an indexed layer of 4 heads, q latent 32, kv latent 16,
// qk 8 + 4, v 12, an indexer of 2 heads of 8, top 8; layer 2 sliding;
// layers 1 and 2 MoE: 8 experts of 32 in 2 groups, 2 a token, 2 shared
// of 24), 2 samples of 32 tokens, at 1, 2 and 3 layers, sdpa, the experts
// as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/dots3_note-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// (hf_block_saved.py remakes a per_layer_config model's config from the
// file cut to LAYERS.) The harness's kept bytes. v equals the qk width in
// every layer so that the CPU's SDPA runs its flash kernel, as CUDA's
// fused kernels run MLA (unequal widths fall back to the math path,
// which keeps the s x s probabilities). Among them: the kv latent's
// contiguous copy saved by kv_a_layernorm (fp32) beside the projection's
// whole output saved through the rope key's view by
// k_rope_only_layernorm; the scaled latents saved by q_b_proj and
// kv_b_proj; the per-head gate's sigmoid in the model's dtype; the
// sliding window's and the indexer's [2, 1, 32, 32] biases; the
// indexed layers' fp32 rope tables (sliding layers' in the model's
// dtype). param_bytes at 3 layers: 690,912 fp32, 347,504 bf16 (the
// routers' weights kept fp32).
func TestDots3NoteSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "dots3_note-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{372_740, 796_196, 1_180_740}},
		{"bf16", "sdpa", [3]int64{229_124, 483_620, 717_124}},
	})
}

// The same with the experts as transformers' eager loop
// (experts_implementation "eager"):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/dots3_note-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 eagerexperts
//
// keeps fp32 1,024,516 and 1,637,380 bytes, bf16 597,252 and 944,388,
// less the views the loop takes of gate_up_proj and down_proj, which the
// harness counts (8 x 64 x 64 + 8 x 64 x 32 elements an MoE layer).
func TestDots3NoteEagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "dots3_note-tiny.json", 2, 1, 8*64*64+8*64*32, []eagerSaved{
		{"fp32", []int64{1_024_516, 1_637_380}},
		{"bf16", []int64{597_252, 944_388}},
	})
}

// The parameters on the meta device (transformers 5.25.0, torch 2.15.0):
// dots3_note-tiny.json 172,728; Dots3NoteTextConfig()'s defaults
// 279,551,718,016 (46 layers of 5120, 152,064 untied embeddings;
// indexed layers of 128 heads, q latent 1024, kv latent 512, qk 128 + 64,
// v 128, an indexer of 64 heads of 128; sliding layers, 2 of every 4
// after the first two by default, of 64 heads, q and kv latents 1024,
// qk 192 + 64, v 128; layer 0 dense of 13,824, then 256 experts of 1536,
// 8 a token, one shared of 1536), its docstring's checkpoint
// dots-studio/dots3-note-prev, whose config.json is not reachable here:
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.Dots3NoteForCausalLM(t.Dots3NoteTextConfig()).parameters()))"
func TestDots3NoteParams(t *testing.T) {
	checkParams(t, map[string]int64{"dots3_note-tiny.json": 172_728})
	m, err := hf.FromConfig([]byte(`{"model_type": "dots3_note_text", "architectures": ["Dots3NoteForCausalLM"], "vocab_size": 152064,
 "hidden_size": 5120, "num_hidden_layers": 46, "num_attention_heads": 128}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 279_551_718_016 {
		t.Errorf("Dots3NoteTextConfig's defaults: %d parameters, want 279,551,718,016", got)
	}
}

// Dots3NoteTextConfig read as transformers 5.25.0 reads it, each count
// and refusal from the class on the meta device (dots3_note-tiny.json
// edited; the refusals are validate_architecture's): the layer kinds
// from layer_types, or by default indexed where i < 2 or i % 4 == 1 and
// sliding elsewhere (use_sliding_window false: all indexed), use_dsa
// false dropping the indexers (their 1,168 parameters); the MoE layers
// from mlp_layer_types or moe_layer_freq; the form save_pretrained
// writes (dots3_note-tiny-saved.json: per_layer_config keyed by layer
// in place of the swa_ keys, use_dsa then unset) builds the same model
// and keeps the same bytes. transformers 5.22.2 has no models/dots3_note
// (the 5.23.0 wheel is the first: unzip -l); eager is refused as for
// every latent attention; the names are transformers'.
func TestDots3NoteConfig(t *testing.T) {
	tiny := string(readHF(t, "dots3_note-tiny.json"))
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 172_728},
		{"use_dsa false", `"first_k_dense_replace": 1`, `"first_k_dense_replace": 1, "use_dsa": false`, 171_560},
		{"default layer_types", `"layer_types": ["sliding_attention", "indexed_attention", "sliding_attention"],`, "", 177_122},
		{"use_sliding_window false", `"layer_types": ["sliding_attention", "indexed_attention", "sliding_attention"],`, `"use_sliding_window": false,`, 181_516},
		{"moe_layer_freq list", `"first_k_dense_replace": 1`, `"first_k_dense_replace": 1, "moe_layer_freq": [0, 1, 0]`, 132_280},
		{"mlp_layer_types", `"first_k_dense_replace": 1`, `"mlp_layer_types": ["dense", "dense", "sparse"]`, 132_280},
		{"swa_qk_rope_head_dim from swa_head_dim", `"swa_head_dim": 16`, `"swa_head_dim": 18`, 173_180},
		{"swa_head_dim's default", `"swa_head_dim": 16,`, "", 226_968},
		{"one shared expert", `"n_shared_experts": 2`, `"n_shared_experts": 1`, 163_512},
		{"attention_bias", `"tie_word_embeddings": false`, `"tie_word_embeddings": false, "attention_bias": true`, 173_056},
		{"tied", `"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 166_328},
	})
	checkParams(t, map[string]int64{"dots3_note-tiny-saved.json": 172_728})
	for _, p := range []string{"fp32", "bf16"} {
		got, want := graniteSaved(t, "dots3_note-tiny-saved.json", 0, p, "sdpa", false), graniteSaved(t, "dots3_note-tiny.json", 3, p, "sdpa", false)
		if got != want {
			t.Errorf("%s: the saved form keeps %d bytes, the file %d", p, got, want)
		}
	}
	for _, tc := range []struct{ old, new, err string }{
		{`"num_key_value_heads": 4`, `"num_key_value_heads": 2`, `"num_key_value_heads" must equal num_attention_heads (4)`},
		{`"num_key_value_heads": 4,`, ``, `"num_key_value_heads" must equal num_attention_heads (4) for model_type dots3_note_text (got 128`},
		{`"q_lora_rank": 32`, `"q_lora_rank": null`, `"q_lora_rank" must be a positive integer (got null)`},
		{`"n_group": 2`, `"n_group": 3`, `"n_group" (3) must divide n_routed_experts (8)`},
		{`"layer_types": ["sliding_attention",`, `"layer_types": ["linear_attention",`, `"layer_types" layer 0 is the string "linear_attention": each must be`},
		{`"swa_num_key_value_heads": 2`, `"swa_num_key_value_heads": 1`, `"swa_num_key_value_heads" must equal swa_num_attention_heads (2)`},
	} {
		if _, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.old, tc.new, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.err)
		}
	}
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.22.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "dots3_note_text" needs transformers 5.23 or later`) {
		t.Errorf("transformers 5.22.2: error %v, want one naming 5.23", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "eager"); err == nil {
		t.Error("eager: no error, want the latent attention's refusal")
	}
	checkHasParams(t, tiny, "model.layers.0.self_attn.q_a_proj.weight", "model.layers.0.self_attn.k_rope_only_layernorm.weight",
		"model.layers.0.self_attn.g_proj.weight", "model.layers.0.self_attn.kv_b_proj.weight", "model.layers.0.mlp.gate_proj.weight",
		"model.layers.1.self_attn.indexer.wq_b.weight", "model.layers.1.self_attn.indexer.weights_proj.weight",
		"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.shared_experts.down_proj.weight",
		"model.norm.weight", "lm_head.weight")
}
