package sim

import (
	"encoding/json"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// TestRopeTablesSavedAsTransformers: the rotary cos and sin a decoder
// makes once a forward (rotary_emb(hidden_states, position_ids), each
// [1, seq, width] in the model's dtype: the position_ids a forward makes
// itself have one row for the whole batch) and every layer's
// apply_rotary_pos_emb saves (q * cos, rotate_half(q) * sin): one pair
// however many layers and samples (nn.Attention.ropeTables). What
// autograd saves in the whole model, 1 and 2 layers, 64 tokens in bf16
// under SDPA, on the CPU with torch 2.15.0 and transformers 5.25.0:
//
//	python tools/oracle/hf_block_saved.py CONFIG.json {1,2} {1,2} 64 bfloat16 sdpa nocache
//
// CONFIG a file of sim/testdata/hf, or one with the row's keys set (the
// same overrides; num_hidden_layers in text_config for Qwen3-VL). With v:
// two (1, 1, 64, 16) bf16 storages of 2,048 bytes at any depth and batch
// for Llama; OLMo 2's are fp32, 8,192 bytes the pair; partial rotary's
// are int(head_dim x factor) wide (Phi-3 with partial_rotary_factor 0.5,
// GLM-4.5's 0.5 and GPT-NeoX's rotary_pct 0.25 of 16: (1, 1, 64, 8) and
// (1, 1, 64, 4)); the vision-language models' carry the batch ((2, 1, 64,
// 16) at batch 2: the multimodal position ids are [3, batch, seq]).
// memsh counts all of it, the loss's shifted labels too (at batch 1 a
// (64,) view of the 65 padded ones, at batch 2 a (128,) copy: core's
// loss_labels.go). Falcon is measured under eager attention (its SDPA
// path gets a mask on the CPU: TestFalconSharedPath). Qwen3-Next and
// Qwen3.5 (VL) with full_attention_interval 1 (every layer gated
// attention; Qwen3-Next's all MoE): (1, 1, 64, 8) bf16, partial 0.25 of
// 32, and (2, 1, 64, 4) at batch 2 for Qwen3.5 VL. Qwen3-Next's MoE
// layers keep grouped_mm's int32 offsets too (16 B a layer: 4 experts),
// which memsh counted for none before (nn/moe_hf.go).
//
// Phi-3, GPT-NeoX, GLM-4.5, Qwen3-Next and Qwen3.5 end their rope in a
// torch.cat, which leaves q head major: SDPA's output follows q's layout
// and o_proj (Qwen3-Next's output gate) saves the contiguous copy of it,
// one [1, 64, heads x head_dim] bf16 tensor a layer (nn.Attention.RopeCat),
// which memsh counted for none before. Qwen3-Next's and Qwen3.5's RMSNorm
// is Gemma's (nn.GemmaNorm, Attention.QKNormGemma). Before the three
// (tables, copy, norms) memsh kept 322,820 bytes of the 1-layer Qwen3.5
// VL, 46,984 under.
func TestRopeTablesSavedAsTransformers(t *testing.T) {
	phiPartial := map[string]any{"partial_rotary_factor": 0.5}
	everyFull := map[string]any{"full_attention_interval": 1, "mlp_only_layers": []any{}}
	q35Full := map[string]any{"full_attention_interval": 1}
	neox := map[string]any{"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 256}
	glm := map[string]any{"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "first_k_dense_replace": 2,
		"n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "num_attention_heads": 4,
		"num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256, "pad_token_id": 0, "eos_token_id": 1}
	for _, tc := range []struct {
		file          string
		set           map[string]any
		attn          string
		layers, batch int64
		measured      int64
	}{
		{"llama-gqa-tiny.json", nil, "sdpa", 1, 1, 260_876},
		{"llama-gqa-tiny.json", nil, "sdpa", 2, 1, 418_060},
		{"llama-gqa-tiny.json", nil, "sdpa", 1, 2, 517_636},
		{"mistral-tiny.json", nil, "sdpa", 1, 1, 260_876},
		{"mistral-tiny.json", nil, "sdpa", 2, 1, 418_060},
		{"phi3-tiny.json", nil, "sdpa", 1, 1, 281_356},
		{"phi3-tiny.json", nil, "sdpa", 2, 1, 459_020},
		{"phi3-tiny.json", phiPartial, "sdpa", 1, 1, 279_308},
		{"phi3-tiny.json", phiPartial, "sdpa", 2, 1, 456_972},
		{"olmo2-tiny.json", nil, "sdpa", 1, 1, 339_212},
		{"olmo2-tiny.json", nil, "sdpa", 2, 1, 562_444},
		{"olmo2-tiny.json", nil, "sdpa", 1, 2, 670_212},
		{"pythia-160m.json", neox, "sdpa", 1, 1, 233_228},
		{"pythia-160m.json", neox, "sdpa", 2, 1, 382_220},
		{"pythia-160m.json", neox, "sdpa", 1, 2, 465_412},
		{"pythia-160m.json", neox, "sdpa", 2, 2, 763_396},
		{"glm-4.5-air.json", glm, "sdpa", 1, 1, 267_020},
		{"glm-4.5-air.json", glm, "sdpa", 2, 1, 432_396},
		{"falcon-tiny.json", nil, "eager", 1, 1, 265_740},
		{"falcon-tiny.json", nil, "eager", 2, 1, 476_940},
		{"qwen2.5-vl-tiny.json", nil, "sdpa", 1, 1, 272_140},
		{"qwen2.5-vl-tiny.json", nil, "sdpa", 2, 2, 858_628},
		{"qwen3-vl-tiny.json", nil, "sdpa", 2, 1, 506_124},
		{"qwen3-vl-tiny.json", nil, "sdpa", 2, 2, 1_012_228},
		{"qwen3-next-tiny.json", everyFull, "sdpa", 1, 1, 356_508},
		{"qwen3-next-tiny.json", everyFull, "sdpa", 2, 1, 635_692},
		{"qwen3.5-vl-tiny.json", q35Full, "sdpa", 1, 1, 369_804},
		{"qwen3.5-vl-tiny.json", q35Full, "sdpa", 2, 2, 1_236_996},
	} {
		want := tc.measured
		m, err := hf.FromConfigOptions(ropeConfig(t, tc.file, tc.layers, tc.set), hf.Options{Attn: tc.attn, Transformers: "5.25.0"})
		if err != nil {
			t.Fatal(tc.file, err)
		}
		if got := cpuSavedModel(t, m, tc.batch, 64, false); got != want {
			t.Errorf("%s %v, %d layers, batch %d: memsh keeps %d bytes, transformers %d (%+d)", tc.file, tc.set, tc.layers, tc.batch, got, want, got-want)
		}
	}
	// Before 5.17 (the 5.0.0 wheel) Qwen2.5-VL's apply_multimodal_rotary_pos_emb
	// cats the mrope sections into a new pair in every layer: two layers at
	// batch 2 keep one (2, 64, 16) bf16 pair more, 8,192 bytes (read in the
	// source; the harness runs 5.25.0 only).
	per := map[string]int64{}
	for _, v := range []string{"5.0.0", "5.25.0"} {
		m, err := hf.FromConfigOptions(ropeConfig(t, "qwen2.5-vl-tiny.json", 2, nil), hf.Options{Attn: "sdpa", Transformers: v})
		if err != nil {
			t.Fatal(err)
		}
		per[v] = cpuSavedModel(t, m, 2, 64, false)
	}
	if d := per["5.0.0"] - per["5.25.0"]; d != 2*2*64*16*2 {
		t.Errorf("qwen2.5-vl under 5.0.0 keeps %d bytes more than under 5.25.0, want one more pair of tables (8,192)", d)
	}
}

// TestRopeTablesOfTheOtherFamilies: the families whose whole count differs
// from transformers' on the CPU for other, named reasons hold their rotary
// tables to what the harness lists (as TestRopeTablesSavedAsTransformers,
// with v): what memsh keeps with them less what it keeps without.
//
//   - gpt-oss (eager: GptOssForCausalLM has no SDPA path), 1 and 2
//     layers: two (1, 1, 64, 8) bf16 storages, half a head of 16
//     (GptOssRotaryEmbedding does not repeat its frequencies). The
//     whole count is exact (TestGptOssSavesAsTransformers).
//   - DeepSeek-V3 (tools/oracle/dsa_v3_2layers.json shrunk as the row
//     sets): two (1, 1, 64, 2) bf16 views of (1, 64, 4) storages, 512
//     bytes each (apply_rotary_pos_emb_interleave's even and odd slices
//     of cos and sin [1, seq, qk_rope_head_dim]). DeepSeek-V2
//     (deepseek-v2-tiny.json): one (1, 1, 64, 2) complex64 freqs_cis, 1,024
//     bytes. Their whole counts differ by CPU's math SDPA over the full
//     scores (TestDeepSeekV2LayerSavesAsTransformers).
func TestRopeTablesOfTheOtherFamilies(t *testing.T) {
	gptOSS := tinyGptOSS()
	dsv3 := map[string]any{"hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32, "num_attention_heads": 4,
		"num_key_value_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
		"v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2, "vocab_size": 256}
	for _, tc := range []struct {
		file          string
		set           map[string]any
		attn          string
		layers, batch int64
		tables        int64 // the bytes of the storages the harness lists
	}{
		{"gpt-oss-20b.json", gptOSS, "eager", 1, 1, 2 * 1_024},
		{"gpt-oss-20b.json", gptOSS, "eager", 2, 1, 2 * 1_024},
		{"../../../tools/oracle/dsa_v3_2layers.json", dsv3, "sdpa", 1, 1, 2 * 512},
		{"../../../tools/oracle/dsa_v3_2layers.json", dsv3, "sdpa", 2, 1, 2 * 512},
		{"deepseek-v2-tiny.json", nil, "sdpa", 1, 1, 1_024},
		{"deepseek-v2-tiny.json", nil, "sdpa", 2, 1, 1_024},
	} {
		m, err := hf.FromConfigOptions(ropeConfig(t, tc.file, tc.layers, tc.set), hf.Options{Attn: tc.attn, Transformers: "5.25.0"})
		if err != nil {
			t.Fatal(tc.file, err)
		}
		got := cpuSavedModel(t, m, tc.batch, 64, false) - cpuSavedModel(t, m, tc.batch, 64, true)
		if got != tc.tables {
			t.Errorf("%s, %d layers, batch %d: the rotary tables add %d bytes, transformers keeps %d", tc.file, tc.layers, tc.batch, got, tc.tables)
		}
	}
}

// TestGptOssSavesAsTransformers: what autograd keeps in a whole tiny
// gpt-oss (tinyGptOSS: hidden 64,
// 4 heads, 2 kv heads of 16, 4 experts, top 2), 1 and 2 layers, one
// sequence of 64 tokens in bf16 under eager attention, on the CPU with
// torch 2.15.0 and transformers 5.25.0 (the rows' config written out with
// num_hidden_layers and layer_types cut to the depth):
//
//	python tools/oracle/hf_block_saved.py CONFIG.json {1,2} 1 64 bfloat16 eager v nocache
//
// 413,468 and 717,100 bytes. Three things
// memsh lowered as Llama's before, 9,224 and 10,248 bytes under (after
// grouped_mm's offsets were counted): GptOssRMSNorm is OLMo 2's (the
// weight times the fp32 normed rows, kept in fp32: 8,192 more a norm);
// the sinks' softmax runs in the logits' bf16 (its output the only copy
// of the probabilities; 66,560 B of fp32 probabilities fewer) and the
// row max before it keeps its int64 indices ((1, 4, 64, 1), 2,048 B);
// the experts' clamped gate keeps gate_up and four [128, 64] bf16
// tensors where SwiGLU keeps two (3 x 16,384 more a layer).
func TestGptOssSavesAsTransformers(t *testing.T) {
	gptOSS := tinyGptOSS()
	for _, tc := range []struct {
		layers   int64
		measured int64
	}{
		{1, 413_468},
		{2, 717_100},
	} {
		m, err := hf.FromConfigOptions(ropeConfig(t, "gpt-oss-20b.json", tc.layers, gptOSS), hf.Options{Attn: "eager", Transformers: "5.25.0"})
		if err != nil {
			t.Fatal(err)
		}
		want := tc.measured
		if got := cpuSavedModel(t, m, 1, 64, false); got != want {
			t.Errorf("%d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.layers, got, want, got-want)
		}
	}
}

// tinyGptOSS is the keys that shrink gpt-oss-20b.json to a tiny model.
func tinyGptOSS() map[string]any {
	return map[string]any{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"num_local_experts": 4, "num_experts_per_tok": 2, "experts_per_token": 2, "intermediate_size": 64, "vocab_size": 256,
		"layer_types": []any{"sliding_attention", "full_attention"}, "sliding_window": 128, "pad_token_id": 0, "eos_token_id": 1}
}

// ropeConfig is a config of sim/testdata/hf with set's keys set (where
// the model has a text_config, there; layer_types cut to the depth) and
// num_hidden_layers set to layers.
func ropeConfig(t *testing.T, file string, layers int64, set map[string]any) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(readHF(t, file), &cfg); err != nil {
		t.Fatal(file, err)
	}
	at := cfg
	if tc, ok := cfg["text_config"].(map[string]any); ok {
		at = tc
	}
	for k, v := range set {
		at[k] = v
	}
	at["num_hidden_layers"] = layers
	for _, key := range []string{"layer_types", "mlp_layer_types"} { // cut with the layers, as hf_block_saved.py cuts them
		if lt, ok := at[key].([]any); ok && int64(len(lt)) > layers {
			at[key] = lt[:layers]
		}
	}
	if _, ok := set["full_attention_interval"]; ok {
		delete(at, "layer_types")
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// cpuSavedModel is what m keeps for backward in bf16 on the CPU runtime,
// batch samples of seq tokens; noTables clears every attention's rotary
// tables first (the counts before they were modelled).
func cpuSavedModel(t *testing.T, m *core.Model, batch, seq int64, noTables bool) int64 {
	t.Helper()
	if noTables {
		for _, l := range m.Layers {
			core.Walk(l, "", func(_ string, l core.Layer) {
				switch a := l.(type) {
				case *nn.Attention:
					a.RopeTables = ""
				case *nn.MLA:
					a.RopeTables = ""
				case *nn.Gemma4Attention:
					a.RopeTables = ""
				}
			})
		}
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), batch, seq
	return evalPlan(t, p).SavedActivations
}

// withLayers is a tiny config with num_hidden_layers set to layers.
func withLayers(t *testing.T, file string, layers int64) []byte {
	t.Helper()
	return ropeConfig(t, file, layers, nil)
}
