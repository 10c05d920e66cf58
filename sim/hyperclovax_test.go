package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// HyperCLOVAX's parameters on the meta device (transformers 5.25.0):
// hyperclovax-tiny.json 131,648 (64 wide, 2 layers, 4 heads of head_dim
// 32, 2 kv heads, MLP 128, vocab 256 untied; four norms a layer with
// use_post_norm's default).
func TestHyperCLOVAXParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"hyperclovax-tiny.json": 131_648,
	})
}

// What HyperCLOVAX's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// hyperclovax-tiny.json, 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hyperclovax-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Granite's layer (the multipliers off 1, heads of head_dim 32 on a 64
// wide model) with post_norm1 and post_norm2 after the attention and the
// MLP, each Llama's RMSNorm; hyperclovax-tiny-nopost.json, the same with
// "use_post_norm": false, bf16 sdpa: Granite's layer (post_norm1 and
// post_norm2 are nn.Identity).
func TestHyperCLOVAXSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"hyperclovax-tiny-nopost.json", "bf16", "sdpa", 285_444, 467_204},
		{"hyperclovax-tiny.json", "fp32", "sdpa", 519_428, 914_692},
		{"hyperclovax-tiny.json", "fp32", "eager", 583_940, 1_043_716},
		{"hyperclovax-tiny.json", "bf16", "sdpa", 335_108, 566_532},
		{"hyperclovax-tiny.json", "bf16", "eager", 399_620, 695_556},
	})
}

// hyperclovax under 5.9 is refused (the 5.8.0 wheel has no
// models/hyperclovax, 5.9.0 has); use_post_norm false drops the two
// post-norms (nn.Identity); attention_bias biases q, k, v and o and
// mlp_bias the MLP (Granite's); a hidden_size heads do not divide is
// refused whatever head_dim says (validate_architecture); the logits'
// product by logits_scaling is one op.
func TestHyperCLOVAXConfig(t *testing.T) {
	tiny := string(readHF(t, "hyperclovax-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.8.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "hyperclovax" needs transformers 5.9 or later`) {
		t.Errorf("transformers 5.8.0: error %v, want one naming 5.9", err)
	}
	checkParams(t, map[string]int64{"hyperclovax-tiny-nopost.json": 131_648 - 2*2*64})
	checkEditedParams(t, tiny, []configEdit{
		{"attention_bias", `"rms_norm_eps"`, `"attention_bias": true, "rms_norm_eps"`, 131_648 + 2*(128+64+64+64)},
		{"mlp_bias", `"rms_norm_eps"`, `"mlp_bias": true, "rms_norm_eps"`, 131_648 + 2*(128+128+64)},
		{"no head_dim", `"head_dim": 32`, `"head_dim": null`, 131_648 - 2*(8192+4096+4096+8192)/2},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"hidden_size 66", `"hidden_size": 64`, `"hidden_size": 66`, `"hidden_size"`},
		{"use_post_norm 1", `"rms_norm_eps"`, `"use_post_norm": 1, "rms_norm_eps"`, `"use_post_norm"`},
	})
	checkHasParams(t, tiny, "model.layers.0.post_norm1.weight", "model.layers.1.post_norm2.weight", "lm_head.weight")
}
