package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Mellum's parameters, which transformers 5.25.0 counts on the meta
// device (AutoModelForCausalLM.from_config under torch.device("meta"),
// summing numel; the first line of `/work/venv-t/bin/python
// tools/oracle/hf_defaults.py --only FILE`): mellum-tiny.json 194,080;
// mellum-defaults.json 12,149,923,072. The latter is MellumConfig() written out
// (its defaults, the Mellum2-12B-A2.5B-Base its docstring names), the
// count transformers builds from it: JetBrains' config.json and card are
// not reachable from here, so no published count is held.
func TestMellumParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"mellum-tiny.json":     194_080,
		"mellum-defaults.json": 12_149_923_072,
	})
}

// What Mellum's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, grouped_mm experts):
// mellum-tiny.json (64 wide, 4 heads of 16, 2 kv heads, layer_types
// sliding, full, sliding over a window of 16, mlp_layer_types dense (an
// MLP of 128), sparse, sparse (8 experts of 32, 2 a token)), 2 samples of
// 32 tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/mellum-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Qwen3-MoE's layers, the sliding ones masked past 16 keys (without the
// window memsh kept 24,576 bytes less at 1 layer in fp32 sdpa), each
// layer type rotated by its own pair (one pair for both kept 4,096 less
// at 2 and 3 layers): each checked against these rows. Under full
// checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestMellumSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "mellum-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{475_396, 817_700, 1_180_484}},
		{"fp32", "eager", [3]int64{498_948, 889_380, 1_275_716}},
		{"bf16", "sdpa", [3]int64{309_508, 514_340, 729_412}},
		{"bf16", "eager", [3]int64{353_540, 614_692, 873_796}},
	})
}

// The same with the experts as transformers' eager loop, sdpa, 2 and 3
// layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/mellum-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache eagerexperts
//
// fp32 1,046,020 / 1,637,124, bf16 627,972 / 956,676, less the views the
// loop takes of gate_up_proj and down_proj in each MoE layer, which the
// harness counts (8 x 64 x 64 + 8 x 64 x 32 elements, as Laguna's).
func TestMellumEagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "mellum-tiny.json", 2, 1, 8*64*64+8*64*32, []eagerSaved{
		{"fp32", []int64{1_046_020, 1_637_124}},
		{"bf16", []int64{627_972, 956_676}},
	})
}

// mellum under a release before models/mellum is refused, naming the
// release; attention_bias biases every projection; mlp_layer_types picks
// the sparse layers (all by default), num_experts (alias
// num_local_experts) their experts (64 by default), and Qwen3-MoE's
// decoder_sparse_step and mlp_only_layers are not read; the module names
// are transformers'; what MellumConfig or MellumModel refuses is refused
// naming its key. Each edit's count is the one transformers 5.25.0 builds
// on the meta device from the edited file (194,656; 219,168; 177,696;
// 889,376; 144,416; 194,080 twice), each refusal one it makes (num_mtp_layers
// 2: validate_architecture; a narrowed table: a RuntimeError in
// apply_rotary_pos_emb; flat rope_parameters: a KeyError; a null window
// with sliding layers: a ValueError making the mask; an unknown MLP type:
// validate_layer_type).
func TestMellumConfig(t *testing.T) {
	tiny := string(readHF(t, "mellum-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.9.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "mellum" needs transformers 5.10 or later`) {
		t.Errorf("transformers 5.9.0: error %v, want one naming 5.10", err)
	}
	// A layer: q and o_proj 64 x 64, k and v 64 x 32, q_norm and k_norm
	// of 16, two norms of 64; an MLP of 3 x 64 x 128, or a router of
	// 8 x 64 and 8 experts of 2 x 32 x 64 + 64 x 32; the embeddings and
	// head 256 x 64.
	const attn, dense, embed = 2*64*64 + 2*64*32 + 2*16 + 2*64, 3 * 64 * 128, 256 * 64
	sparse := func(e int64) int64 { return e*64 + e*(2*32*64+64*32) }
	all := 3*attn + dense + 2*sparse(8) + 2*embed + 64
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", all},
		{"attention_bias", `"attention_bias": false`, `"attention_bias": true`, all + 3*(64+32+32+64)},
		{"every layer sparse", `"mlp_layer_types": ["dense", "sparse", "sparse"],`, ``, all - dense + sparse(8)},
		{"tied", `"tie_word_embeddings": false`, `"tie_word_embeddings": true`, all - embed},
		{"MellumConfig's 64 experts", `"num_experts": 8,`, ``, all + 2*(sparse(64)-sparse(8))},
		{"num_local_experts", `"num_experts": 8,`, `"num_local_experts": 4,`, all + 2*(sparse(4)-sparse(8))},
		{"Qwen3-MoE's keys are not read", `"num_experts": 8,`, `"num_experts": 8, "decoder_sparse_step": 2, "mlp_only_layers": [1],`, all},
		{"one MTP layer, not built", `"num_experts": 8,`, `"num_experts": 8, "num_mtp_layers": 1,`, all},
	})
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.o_proj.weight",
		"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj",
		"model.layers.2.mlp.experts.down_proj", "model.layers.2.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
	const rope = `"rope_parameters": {
    "full_attention": {"rope_theta": 500000.0, "rope_type": "default"},`
	checkEditedRefused(t, tiny, []configRefusal{
		{"two MTP layers", `"num_experts": 8,`, `"num_experts": 8, "num_mtp_layers": 2,`, `"num_nextn_predict_layers" (2) must be 0 or 1`},
		{"a narrowed table", rope, `"rope_parameters": {
    "full_attention": {"rope_theta": 500000.0, "rope_type": "default", "partial_rotary_factor": 0.5},`, `"rope_parameters" full_attention's partial_rotary_factor (0.5) with rope_type "default"`},
		{"flat rope_parameters", `"rope_parameters": {`, `"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "unused": {`, `"rope_parameters" has no "full_attention" entry`},
		{"no window", `"sliding_window": 16`, `"sliding_window": null`, `"sliding_window" is null`},
		{"an unknown MLP type", `"mlp_layer_types": ["dense", "sparse", "sparse"]`, `"mlp_layer_types": ["dense", "moe", "sparse"]`, `"mlp_layer_types" layer 1 is the string "moe"`},
		{"an unknown layer type", `"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]`, `"layer_types": ["sliding_attention", "chunked_attention", "sliding_attention"]`, `"layer_types" names an attention type memsh does not know`},
	})
}
