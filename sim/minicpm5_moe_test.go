package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/hftest"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What MiniCPM5-MoE's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): minicpm5_moe-tiny.json (64 wide, 4 heads of 16, 2 kv
// heads, q_gate_proj 64 x 128; layer 0 dense of 96, then 8 experts of 32,
// 2 a token, 1 shared), 2 samples of 32 tokens, at 1, 2 and 3 layers, the
// experts as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minicpm5_moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// The harness's kept bytes (it saves 2,048 B a MoE layer more on the
// expert selection's branch, which no gradient reaches). param_bytes and
// grad_bytes at 3 layers: 769,792 (fp32), 386,944 (bf16: the routers and
// their correction biases fp32).
func TestMiniCPM5MoeSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "minicpm5_moe-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{360_196, 713_252, 1_066_308}},
		{"fp32", "eager", [3]int64{408_324, 809_508, 1_210_692}},
		{"bf16", "sdpa", [3]int64{218_884, 432_676, 646_468}},
		{"bf16", "eager", [3]int64{275_204, 545_316, 815_428}},
	})
	for _, tc := range []struct {
		precision string
		want      int64
	}{{"fp32", 769_792}, {"bf16", 386_944}} {
		r := evalPlan(t, hfSavedPlan(t, "minicpm5_moe-tiny.json", 3, tc.precision, hf.Options{Attn: "sdpa"}, false))
		if r.States.Params != tc.want || r.States.Grads != tc.want {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d", tc.precision, r.States.Params, r.States.Grads, tc.want)
		}
	}
}

// The same with the experts as transformers' eager loop, sdpa:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minicpm5_moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 eagerexperts
//
// less the views the loop takes of gate_up_proj and down_proj for experts
// e > 0 in each MoE layer, which the harness counts (8 x 64 x 64 + 8 x 64
// x 32 elements; TestFlexOlmoExpertsAsTransformers).
func TestMiniCPM5MoeEagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "minicpm5_moe-tiny.json", 1, 1, 8*64*64+8*64*32, []eagerSaved{
		{"fp32", []int64{360_196, 941_572, 1_522_948}},
		{"bf16", []int64{218_884, 546_308, 873_732}},
	})
}

// minicpm5_moe under 5.24.0 is refused (models/minicpm5_moe came with
// 5.25); the parameter counts of variants of the tiny file are
// transformers 5.25.0's on the meta device (MiniCPM5MoeForCausalLM built
// from the edited config):
//
//	file 192,448; attention_bias 193,216; head_dim null 192,448 (64 / 4);
//	head_dim absent 536,512 (128); num_local_experts 6 for
//	n_routed_experts 167,616; n_shared_experts 2 204,736; mlp_layer_types
//	all "sparse" 229,824; first_k_dense_replace 2 155,072; without
//	first_k_dense_replace 192,448 (its default 1)
//
// use_gated_attention false is refused as MiniCPM5MoeConfig refuses it
// (validate_architecture: "MiniCPM5Moe requires gated attention"), a
// partial_rotary_factor as memsh does not model it; the names are
// transformers'.
func TestMiniCPM5MoeConfig(t *testing.T) {
	tiny := string(readHF(t, "minicpm5_moe-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.24.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "minicpm5_moe" needs transformers 5.25 or later`) {
		t.Errorf("transformers 5.24.0: error %v, want one naming 5.25", err)
	}
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 192_448},
		{"attention_bias", `"tie_word_embeddings": false`, `"tie_word_embeddings": false, "attention_bias": true`, 193_216},
		{"head_dim null", `"head_dim": 16`, `"head_dim": null`, 192_448},
		{"head_dim absent", `"head_dim": 16,`, ``, 536_512},
		{"num_local_experts", `"n_routed_experts": 8`, `"num_local_experts": 6`, 167_616},
		{"n_shared_experts 2", `"n_shared_experts": 1`, `"n_shared_experts": 2`, 204_736},
		{"all sparse", `"first_k_dense_replace": 1`, `"mlp_layer_types": ["sparse", "sparse", "sparse"]`, 229_824},
		{"first_k_dense_replace 2", `"first_k_dense_replace": 1`, `"first_k_dense_replace": 2`, 155_072},
		{"first_k_dense_replace's default", `"first_k_dense_replace": 1,`, ``, 192_448},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"use_gated_attention false", `"tie_word_embeddings": false`, `"tie_word_embeddings": false, "use_gated_attention": false`, "use_gated_attention"},
		{"partial_rotary_factor", `"tie_word_embeddings": false`, `"tie_word_embeddings": false, "partial_rotary_factor": 0.5`, "partial_rotary_factor"},
		{"rope_parameters' partial_rotary_factor", `"rope_theta": 5000000.0}`, `"rope_theta": 5000000.0, "partial_rotary_factor": 0.5}`, "rope_parameters"},
		{"both expert counts", `"n_routed_experts": 8`, `"n_routed_experts": 8, "num_local_experts": 8`, "num_local_experts"},
		{"a malformed mlp_layer_types", `"first_k_dense_replace": 1`, `"mlp_layer_types": ["dense", "moe", "sparse"]`, "mlp_layer_types"},
		{"top-k past the experts", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 9`, "num_experts_per_tok"},
	})
	// minicpm5_moe-15b-a2.5b.json: MiniCPM5MoeConfig's defaults, the sizes
	// of its docstring's checkpoint openbmb/MiniCPM5-15B-A2.5B (28 layers
	// of 2048, 32 heads of 128, 2 kv heads, layer 0 dense of 8192, then 160
	// experts of 512, 16 a token, 1 shared; 130,560 untied embeddings):
	// 15,002,552,320, transformers 5.25.0's count on the meta device (the
	// name's 15B). The hub's config.json itself is not in the stored
	// sources.
	m, err := hf.FromConfig(readHF(t, "minicpm5_moe-15b-a2.5b.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 15_002_552_320 {
		t.Errorf("MiniCPM5-15B-A2.5B: %d parameters, want 15,002,552,320", got)
	}
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.0.self_attn.q_gate_proj.weight",
		"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj",
		"model.layers.2.mlp.shared_experts.down_proj.weight", "model.layers.1.post_attention_layernorm.weight", "lm_head.weight")
}

// A config.json without num_experts_per_tok routes each token to
// MiniCPM5MoeConfig's default 16 experts (configuration_minicpm5_moe.py,
// transformers 5.25.0; memsh refused the file), as without the other keys
// the class defaults (configClasses). What the step keeps for backward,
// minicpm5_moe-tiny.json with n_routed_experts 20 and
// num_experts_per_tok left out (2 layers: the dense one, then 20 experts
// of 32, 16 a token), 2 samples of 32 tokens, fp32, sdpa:
//
//	python tools/oracle/hf_block_saved.py /tmp/family_s37/minicpm5_moe-topk.json 2 2 32 float32 sdpa nocache keepfp32
//
// kept 1,669,716 B (716,372 B with num_experts_per_tok 2 set). Left out
// of the tiny file itself (8 experts), the default 16 is refused: top-k
// past the experts, which transformers builds (192,448 parameters) but
// whose torch.topk fails in the forward.
func TestMiniCPM5MoeTopKDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit map[string]any
		kept int64
	}{
		{"num_experts_per_tok left out", map[string]any{"num_hidden_layers": 2, "n_routed_experts": 20, "num_experts_per_tok": hftest.Removed{}}, 1_669_716},
		{"num_experts_per_tok 2", map[string]any{"num_hidden_layers": 2, "n_routed_experts": 20}, 716_372},
	} {
		m, err := hf.FromConfig(hftest.Edit(t, "minicpm5_moe-tiny.json", tc.edit), "sdpa")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		cpu, err := core.LookupRuntime("cpu")
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = cpu, 2, 32
		if p.Precision, err = core.LookupPrecision("fp32"); err != nil {
			t.Fatal(err)
		}
		if got := evalPlan(t, p).SavedActivations; got != tc.kept {
			t.Errorf("%s: memsh keeps %d bytes, transformers %d (%+d)", tc.name, got, tc.kept, got-tc.kept)
		}
	}
	_, err := hf.FromConfig(hftest.Edit(t, "minicpm5_moe-tiny.json", map[string]any{"num_experts_per_tok": hftest.Removed{}}), "sdpa")
	if err == nil || !strings.Contains(err.Error(), "num_experts_per_tok") || !strings.Contains(err.Error(), "16") {
		t.Errorf("the tiny file without num_experts_per_tok: error %v, want one naming num_experts_per_tok and its default 16", err)
	}
}
