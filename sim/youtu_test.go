package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Youtu's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast): youtu-tiny.json (64 wide, 4
// heads, q through a latent of 16, a kv latent of 16, nope 8, rope 4
// (interleaved: rope_interleave's default), v 12: equal q/k and v widths,
// so the CPU's SDPA takes its flash kernel as CUDA's fused kernels do; MLP
// 96, vocab 128 tied), 2 samples of 32 tokens, at 1, 2 and 3 layers, sdpa
// (the latent-attention families run no eager path):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/youtu-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache
//
// MiniCPM3's tiny model's bytes less its embed_scale buffer: the same
// layers without the scalings, which save nothing else. param_bytes at 3
// layers 345,216 in fp32 (86,304 parameters), 172,608 in bf16.
func TestYoutuSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "youtu-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{378_116, 672_004, 965_892}},
		{"bf16", "sdpa", [3]int64{235_268, 403_204, 571_140}},
	})
}

// Under transformers 5.1.0, the first release with models/youtu, and
// 5.14.0, the last whose YoutuAttention (DeepseekV3Attention) makes the
// key with torch.cat (each wheel unzipped on PYTHONPATH with the packages
// TestMiniCPM3Transformers513 names; torch 2.15.0, the CPU):
//
//	PYTHONPATH=tf5.1.0:deps:nokernels python tools/oracle/hf_block_saved.py sim/testdata/hf/youtu-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache
//	PYTHONPATH=tf5.14.0:deps python tools/oracle/hf_block_saved.py sim/testdata/hf/youtu-tiny.json {1,2} 2 32 float32 sdpa nocache
//
// the same bytes as 5.25.0: 5.1.0 fp32 378,116 / 672,004 / 965,892, bf16
// 235,268 / 403,204 / 571,140; 5.14.0 fp32 378,116 / 672,004.
func TestYoutuTransformers51(t *testing.T) {
	for _, tc := range []struct {
		version, precision string
		saved              []int64
	}{
		{"5.1.0", "fp32", []int64{378_116, 672_004, 965_892}},
		{"5.1.0", "bf16", []int64{235_268, 403_204, 571_140}},
		{"5.14.0", "fp32", []int64{378_116, 672_004}},
	} {
		for i, want := range tc.saved {
			if got := hfSaved(t, "youtu-tiny.json", i+1, tc.precision, hf.Options{Attn: "sdpa", Transformers: tc.version}, false); got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.version, tc.precision, i+1, got, want, got-want)
			}
		}
	}
}

// The parameters on the meta device (transformers 5.25.0):
//
//	/work/venv-t/bin/python - FILE... : sum(p.numel() for p in cls(AutoConfig.for_model(**raw)).parameters()) on torch.device("meta")
//
// youtu-tiny.json 86,304; q_lora_rank null with attention_bias 90,348
// (q_proj unbiased); attention_bias with the head untied 94,796 (q_a_proj
// 16, kv_a_proj_with_mqa 20, o_proj 64 a layer, lm_head 128 x 64).
// YoutuConfig()'s defaults, the "Youtu-LLM-2B style configuration" its
// docstring builds (32 layers of 2048, 16 heads, q latent 1536, kv latent
// 512, nope 128, rope 64, v 128, MLP 6144, 128,256 tied embeddings):
// 1,961,560,064
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AutoModelForCausalLM.from_config(t.YoutuConfig()).parameters()))"
//
// (the hub's config.json and weights index are not reachable here: the
// count is the one transformers builds from the class's defaults).
func TestYoutuParams(t *testing.T) {
	checkParams(t, map[string]int64{"youtu-tiny.json": 86_304})
	tiny := string(readHF(t, "youtu-tiny.json"))
	checkEditedParams(t, tiny, []configEdit{
		{"q_lora_rank null, attention_bias", `"q_lora_rank": 16`, `"q_lora_rank": null, "attention_bias": true`, 90_348},
		{"attention_bias, untied", `"tie_word_embeddings": true`, `"tie_word_embeddings": false, "attention_bias": true`, 94_796},
	})
	m, err := hf.FromConfig([]byte(`{"model_type": "youtu", "architectures": ["YoutuForCausalLM"], "vocab_size": 128256,
 "hidden_size": 2048, "num_hidden_layers": 32, "num_attention_heads": 16}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 1_961_560_064 {
		t.Errorf("YoutuConfig's defaults: %d parameters, want 1,961,560,064", got)
	}
}

// youtu under 5.0.0 is refused (the 5.1.0 wheel is the first with
// models/youtu); eager attention, attention_dropout and a null v_head_dim
// are refused naming the key; the names are transformers'.
func TestYoutuConfig(t *testing.T) {
	tiny := string(readHF(t, "youtu-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.0.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "youtu" needs transformers 5.1 or later`) {
		t.Errorf("transformers 5.0.0: error %v, want one naming 5.1", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "eager"); err == nil || !strings.Contains(err.Error(), "eager") {
		t.Errorf("eager: error %v, want a refusal", err)
	}
	checkEditedRefused(t, tiny, []configRefusal{
		{"attention_dropout", `"v_head_dim": 12`, `"v_head_dim": 12, "attention_dropout": 0.1`, "attention_dropout"},
		{"v_head_dim null", `"v_head_dim": 12`, `"v_head_dim": null`, "v_head_dim"},
	})
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.2.self_attn.q_a_proj.weight",
		"model.layers.2.self_attn.q_a_layernorm.weight", "model.layers.2.self_attn.kv_a_proj_with_mqa.weight",
		"model.layers.2.self_attn.kv_a_layernorm.weight", "model.layers.2.self_attn.kv_b_proj.weight",
		"model.layers.2.self_attn.o_proj.weight", "model.layers.2.mlp.down_proj.weight", "model.norm.weight")
}
