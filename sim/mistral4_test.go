package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Mistral Small 4's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): mistral4-tiny.json (64 wide, 4 heads, q latent 24, kv
// latent 16, qk 8 + 4, v 12 (equal widths: the CPU's flash kernel, where 8 takes the math path), layer 0 dense of 96, then 8 experts of 32 in
// 2 groups, 2 a token, 1 shared), 2 samples of 32 tokens, at 1, 2 and 3
// layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/mistral4-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// The harness's kept bytes (saved is 3,072 B (fp32) a MoE layer more: the
// group mask and the masked scores' top-k, on the selection's branch,
// which no gradient reaches). bf16 param_bytes and grad_bytes at 3
// layers 336,752, half fp32's 673,504: from_pretrained keeps no router fp32.
func TestMistral4SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "mistral4-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{377_220, 750_372, 1_123_524}},
		{"bf16", "sdpa", [3]int64{232_260, 442_916, 653_572}},
	})
}

// Mistral Small 4's text model: 118,972,826,624 parameters, which
// transformers 5.25.0 counts on the meta device for
// mistral-small-4-text.json (Mistral4ForCausalLM(Mistral4Config(**file)),
// torch 2.15.0). The file states Mistral4Config's defaults, which its
// docstring names mistralai/Mistral-Small-4-119B-2603's: 36 layers of 4096,
// 32 heads, q latent 1024, kv latent 256, qk 64 + 64, v 128, 128 experts
// of 2048 (4 a token) and one shared, no dense layer, 131,072 untied
// embeddings. They agree with what Mistral publishes of the model ("119B
// total parameters", 128 experts, 4 active; the released checkpoint
// wraps this text model in Mistral3ForConditionalGeneration with a
// Pixtral tower, whose config.json the stored sources do not hold, so
// the whole checkpoint's count is not asserted here) and with the 22.5
// KiB a token its KV latent caches in bf16 (36 x (256 + 64) x 2 B).
// mistral4-tiny.json: 168,376.
func TestMistral4Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"mistral-small-4-text.json": 118_972_826_624,
		"mistral4-tiny.json":        168_376,
	})
}

// mistral4 before 5.15 is refused with its reason; a rope_parameters
// without llama_4_scaling_beta (transformers reads it unchecked) and
// expert groups Mistral4TopkRouter cannot form are refused, naming the
// key; the names are transformers'.
func TestMistral4Config(t *testing.T) {
	tiny := string(readHF(t, "mistral4-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.14.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "mistral4" needs transformers 5.15 or later`) {
		t.Errorf("transformers 5.14.0: error %v, want one naming 5.15", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.15.0"}); err != nil {
		t.Errorf("transformers 5.15.0: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"no llama_4_scaling_beta", `"llama_4_scaling_beta": 0.1`, `"llama_4_scaling_beta": null`, "rope_parameters"},
		{"groups of one expert", `"n_group": 2`, `"n_group": 8`, "n_group"},
		{"groups not dividing", `"n_group": 2`, `"n_group": 3`, "n_group"},
		{"more groups picked than made", `"topk_group": 1`, `"topk_group": 3`, "topk_group"},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	checkHasParams(t, tiny, "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.2.mlp.shared_experts.down_proj.weight",
		"model.layers.1.self_attn.q_a_layernorm.weight", "model.layers.1.self_attn.kv_b_proj.weight", "lm_head.weight")
}
