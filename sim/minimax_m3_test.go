package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// MiniMax M3's text model on the meta device (transformers 5.25.0, torch
// 2.15.0; hf_block_saved.py's param_bytes / 4 at 3 layers):
// minimax_m3_vl_text-tiny.json 194,144 (64 wide, 4 heads of 16 over 2 kv
// heads, Gemma norms; layer 0 sparse attention with dense MLP, layer 1
// full attention with the MoE, layer 2 both); minimax_m3_vl_text-defaults.json
// 447,186,441,216, MiniMaxM3VLTextConfig()'s defaults as to_dict writes
// them (60 layers of 6144, 64 heads of 128 over 4 kv heads, 128 experts
// of 3072 and a shared one, every layer full attention and MoE; the
// docstring names MiniMaxAI/MiniMax-M3, whose config.json and
// safetensors index were not at hand: its count is not stated here).
func TestMiniMaxM3Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"minimax_m3_vl_text-tiny.json":     776_576 / 4,
		"minimax_m3_vl_text-defaults.json": 447_186_441_216,
	})
}

// What MiniMax M3's text model keeps for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast), 2 samples of 32
// tokens, LAYERS its first layers (layer_types and mlp_layer_types cut):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minimax_m3_vl_text-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// fp32 sdpa 470,148 / 917,540 / 1,414,084, eager 452,740 / 931,876 /
// 1,411,012; bf16 sdpa 344,196 / 630,820 / 942,020, eager 367,748 /
// 702,500 / 1,037,252. A sparse layer's SDPA keeps the indexer's block
// mask of every head ([2, 4, 32, 32] in the model's dtype) and repeat_kv's
// k and v; nothing the indexer saves survives the forward. param_bytes
// and grad_bytes at 3 layers: fp32 776,576 and 751,744, bf16 388,288 and
// 375,872 (the two indexers' q_proj, k_proj, q_norm and k_norm, 3,104
// parameters each, get no gradient).
func TestMiniMaxM3SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "minimax_m3_vl_text-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{470_148, 917_540, 1_414_084}},
		{"fp32", "eager", [3]int64{452_740, 931_876, 1_411_012}},
		{"bf16", "sdpa", [3]int64{344_196, 630_820, 942_020}},
		{"bf16", "eager", [3]int64{367_748, 702_500, 1_037_252}},
	})
	for _, tc := range []struct {
		precision     string
		params, grads int64
	}{{"fp32", 776_576, 751_744}, {"bf16", 388_288, 375_872}} {
		r := evalPlan(t, hfSavedPlan(t, "minimax_m3_vl_text-tiny.json", 3, tc.precision, hf.Options{Attn: "sdpa"}, false))
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d and %d", tc.precision, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// minimax_m3_vl_text under 5.13 is refused (models/minimax_m3_vl came with
// 5.12.0, whose indexer picks one set of blocks for every head); flash is
// refused as transformers refuses it. The checkpoints' spellings,
// sparse_attention_config (sparse_attention_freq; its sparse_* keys win
// over the flat index_* ones) and moe_layer_freq, build what
// MiniMaxM3VLTextConfig builds from them: 191,040 parameters for the
// tiny file with layers 0 and 1 sparse, layers 1 and 2 MoE, the indexer
// 8 wide (transformers 5.25.0 on the meta device:
// MiniMaxM3VLForCausalLM(MiniMaxM3VLTextConfig(..., sparse_attention_config=
// {"sparse_attention_freq": [1, 1, 0], "sparse_num_index_heads": 2,
// "sparse_index_dim": 8}, moe_layer_freq=[0, 1, 1]))); num_experts names
// num_local_experts (attribute_map). Bad layer lists and
// an indexer whose heads do not divide the attention's are refused
// naming the key, and tensor and context parallelism with the indexer's
// layers.
func TestMiniMaxM3Config(t *testing.T) {
	tiny := string(readHF(t, "minimax_m3_vl_text-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.12.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "minimax_m3_vl_text" needs transformers 5.13 or later`) {
		t.Errorf("transformers 5.12.0: error %v, want one naming 5.13", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "flash"); err == nil {
		t.Errorf("flash: no error")
	}
	for _, attn := range []string{"sdpa", "eager"} {
		if _, err := hf.FromConfig([]byte(tiny), attn); err != nil {
			t.Errorf("%s: %v", attn, err)
		}
	}
	lists := `"layer_types": ["minimax_m3_sparse", "full_attention", "minimax_m3_sparse"],
  "max_position_embeddings": 256,
  "mlp_layer_types": ["dense", "sparse", "sparse"],`
	checkEditedParams(t, tiny, []configEdit{
		{"legacy keys", lists, `"max_position_embeddings": 256, "moe_layer_freq": [0, 1, 1],
  "sparse_attention_config": {"sparse_attention_freq": [1, 1, 0], "sparse_num_index_heads": 2, "sparse_index_dim": 8},`, 191_040},
		{"num_experts alias", `"num_local_experts": 8`, `"num_experts": 8`, 194_144},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"mlp type", `"dense", "sparse", "sparse"`, `"dense", "moe", "sparse"`, "mlp_layer_types"},
		{"mlp types short", `"dense", "sparse", "sparse"`, `"dense", "sparse"`, "mlp_layer_types"},
		{"attention type", `"minimax_m3_sparse", "full_attention", "minimax_m3_sparse"`, `"minimax_m3_sparse", "sliding_attention", "minimax_m3_sparse"`, "layer_types"},
		{"index heads", `"index_n_heads": 2`, `"index_n_heads": 3`, "index_n_heads"},
		{"block size", `"index_block_size": 8`, `"index_block_size": 0`, "index_block_size"},
		{"moe_layer_freq", `"mlp_layer_types": ["dense", "sparse", "sparse"]`, `"moe_layer_freq": [0, 1]`, "moe_layer_freq"},
		{"sparse config", `"index_n_heads": 2`, `"index_n_heads": 2, "sparse_attention_config": 4`, "sparse_attention_config"},
	})
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	for _, par := range []core.Parallelism{{TP: 2}, {CP: 2}} {
		p := tinyPlan(t, m)
		p.Parallel = par
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "not modelled for MiniMax M3's sparse layers") {
			t.Errorf("%+v: %v, want the indexer's refusal", par, err)
		}
	}
}

// The same with the experts as transformers' eager loop (the clamped GLU
// in every expert: three more [rows, intermediate] tensors than SwiGLU),
// sdpa, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minimax_m3_vl_text-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache eagerexperts
//
// fp32 1,145,860 / 1,870,724, bf16 744,452 / 1,169,284, less the views
// the loop takes of gate_up_proj and down_proj for experts e > 0 in each
// MoE layer, which the harness counts (8 x 64 x 64 + 8 x 64 x 32
// elements; TestFlexOlmoExpertsAsTransformers).
func TestMiniMaxM3EagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "minimax_m3_vl_text-tiny.json", 2, 1, 8*64*64+8*64*32, []eagerSaved{
		{"fp32", []int64{1_145_860, 1_870_724}},
		{"bf16", []int64{744_452, 1_169_284}},
	})
}

// With every decoder layer checkpointed (use_reentrant=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minimax_m3_vl_text-tiny.json {1,2,3} 2 32 float32 sdpa nocache ckpt held
//
// 132,612 / 148,996 / 165,380: each layer keeps its input (16,384
// bytes), besides the final norm's and the loss's; held, the rotary cos
// and sin (1,024 bytes each, 8 wide) and the position_ids (256), as
// TestGraniteCheckpointSavesAsTransformers says.
func TestMiniMaxM3CheckpointSavesAsTransformers(t *testing.T) {
	for i, want := range []int64{132_612, 148_996, 165_380} {
		if got := graniteSaved(t, "minimax_m3_vl_text-tiny.json", i+1, "fp32", "sdpa", true); got != want+2304 {
			t.Errorf("%d layers: %d saved, want %d (%+d)", i+1, got, want+2304, got-want-2304)
		}
	}
}
