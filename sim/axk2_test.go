package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What A.X-K2's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, loaded by from_pretrained): axk2-tiny.json
// (64 wide, 4 heads, q latent 32, kv latent 16, nope 8, rope 4, v 12; an
// indexer of 2 heads of 8, top 8, in every layer; gated norms of rank 8;
// layer 0 dense of 96 (first_k_dense_replace 1), layers 1 and 2 of 4
// experts of 32, 2 a token, one shared, no expert groups), 2 samples of
// 32 tokens, at 1, 2 and 3 layers, sdpa (eager and flash are refused, as
// for DeepSeek-V3.2), the experts as grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/axk2-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// The harness's kept bytes (all it saves: no branch dies with the
// forward). q_gate_proj's input (the cat of the q latent normed and
// not), the output gate's fp32 sigmoid and product, and each gated
// norm's fc1, silu, fc2, sigmoid and product are among them.
// param_bytes at 3 layers: 589,824 in fp32 (147,456 parameters; the
// indexers' 3,504 get no gradient), 295,936 in bf16 (the two routers'
// 256 weights each kept fp32; weights_proj stays fp32 in fp16 only).
func TestAXK2SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "axk2-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{468_228, 961_044, 1_453_860}},
		{"bf16", "sdpa", [3]int64{296_708, 608_276, 919_844}},
	})
}

// The same with the experts as transformers' eager loop
// (experts_implementation "eager"), fp32:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/axk2-tiny.json {2,3} 2 32 float32 sdpa nocache keepfp32 eagerexperts
//
// keeps 1,091,076 and 1,713,924 bytes, less the views the loop takes of
// gate_up_proj and down_proj, which the harness counts (4 x 64 x 64 + 4 x
// 64 x 32 elements an MoE layer).
func TestAXK2EagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "axk2-tiny.json", 2, 1, 4*64*64+4*64*32, []eagerSaved{{"fp32", []int64{1_091_076, 1_713_924}}})
}

// The parameters: axk2-tiny.json 147,456 (the harness's fp32
// param_bytes / 4); AXK2Config()'s defaults, whose docstring names
// skt/A.X-K2 (its n_group note calls the no-groups default
// A.X-K2-Light's), 20,314,494,976 (48 layers of 2048, 32 heads, q latent
// 384, kv latent 128, an indexer of 16 heads of 128, gated norms of rank
// 16, one dense layer of 5120, then 128 experts of 512, 8 a token, one
// shared, 163,840 untied embeddings; the published config.json was not
// at hand), every key memsh does not ask for left out, on the meta
// device, transformers 5.25.0:
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AXK2ForCausalLM(t.AXK2Config()).parameters()))"
func TestAXK2Params(t *testing.T) {
	checkParams(t, map[string]int64{"axk2-tiny.json": 147_456})
	m, err := hf.FromConfig([]byte(`{"model_type": "axk2", "architectures": ["AXK2ForCausalLM"], "vocab_size": 163840,
 "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 20_314_494_976 {
		t.Errorf("AXK2Config's defaults: %d parameters, want 20,314,494,976", got)
	}
}

// axk2 under 5.16.0 is refused (5.15 and 5.16 build the masks from
// position_ids); a null q_lora_rank and n_group without topk_group are
// refused as AXK2Config refuses them; eager attention is refused as for
// DeepSeek-V3.2; the dense layer's post_attention_layernorm is a plain
// RMSNorm, the MoE layers' a gated one; the names are transformers'.
func TestAXK2Config(t *testing.T) {
	tiny := string(readHF(t, "axk2-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.16.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "axk2" needs transformers 5.17 or later`) {
		t.Errorf("transformers 5.16.0: error %v, want one naming 5.17", err)
	}
	for _, tc := range []struct{ old, new, err string }{
		{`"q_lora_rank": 32`, `"q_lora_rank": null`, `"q_lora_rank" must be a positive integer (got null)`},
		{`"first_k_dense_replace": 1`, `"first_k_dense_replace": 1, "n_group": 2`, `"n_group" and "topk_group" must be set together`},
	} {
		if _, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.old, tc.new, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.err)
		}
	}
	if _, err := hf.FromConfig([]byte(tiny), "eager"); err == nil {
		t.Error("eager: no error, want the latent attention's refusal")
	}
	checkHasParams(t, tiny, "model.layers.0.self_attn.q_a_proj.weight", "model.layers.0.self_attn.q_gate_proj.weight",
		"model.layers.0.self_attn.indexer.wq_b.weight", "model.layers.0.input_layernorm.norm.weight",
		"model.layers.0.input_layernorm.mlp.fc1.weight", "model.layers.0.input_layernorm.mlp.fc2.weight",
		"model.layers.0.post_attention_layernorm.weight", "model.layers.1.post_attention_layernorm.mlp.fc2.weight",
		"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj", "lm_head.weight")
}
