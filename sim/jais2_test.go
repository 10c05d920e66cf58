package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Jais 2's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast): jais2-tiny.json (64 wide, 4
// heads of 16, 2 kv heads, q, k, v and o biased, an ungated MLP of 128
// with biases and the squared ReLU, nn.LayerNorm norms, vocab 256
// untied), 2 samples of 32 tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/jais2-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// param_bytes at 3 layers 483,328 in fp32 (120,832 parameters), 241,664
// in bf16.
func TestJais2SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "jais2-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{286_212, 468_484, 650_756}},
		{"fp32", "eager", [3]int64{334_340, 564_740, 795_140}},
		{"bf16", "sdpa", [3]int64{176_900, 268_548, 360_196}},
		{"bf16", "eager", [3]int64{233_220, 381_188, 529_156}},
	})
}

// The parameters on the meta device (transformers 5.25.0):
//
//	/work/venv-t/bin/python - FILE... : sum(p.numel() for p in cls(AutoConfig.for_model(**raw)).parameters()) on torch.device("meta")
//
// jais2-tiny.json 120,832; attention_bias and mlp_bias false 119,680 (3 x
// (64 + 32 + 32 + 64 + 128 + 64) biases fewer); both left out 120,832
// (Jais2Config's defaults: true); head_dim 8 and the head tied 85,824.
// Jais2Config()'s defaults, its docstring's checkpoint
// inceptionai/Jais-2-8B-Chat (32 layers of 3328, 26 heads, MLP 26,624,
// 150,272 untied embeddings): 8,090,401,280, the card's "8B"
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AutoModelForCausalLM.from_config(t.Jais2Config()).parameters()))"
//
// (the hub's config.json and weights index are not reachable here: the
// count is the one transformers builds from the class's defaults).
func TestJais2Params(t *testing.T) {
	checkParams(t, map[string]int64{"jais2-tiny.json": 120_832})
	tiny := string(readHF(t, "jais2-tiny.json"))
	checkEditedParams(t, tiny, []configEdit{
		{"head_dim 8, tied", `"tie_word_embeddings": false`, `"tie_word_embeddings": true, "head_dim": 8`, 85_824},
	})
	nob := strings.Replace(strings.Replace(tiny, `"attention_bias": true,`, "", 1), `"mlp_bias": true,`, "", 1)
	checkEditedParams(t, nob, []configEdit{{"biases left out", `"vocab_size": 256`, `"vocab_size": 256`, 120_832},
		{"no biases", `"vocab_size": 256`, `"vocab_size": 256, "attention_bias": false, "mlp_bias": false`, 119_680}})
	m, err := hf.FromConfig([]byte(`{"model_type": "jais2", "architectures": ["Jais2ForCausalLM"], "vocab_size": 150272,
 "hidden_size": 3328, "intermediate_size": 26624, "num_hidden_layers": 32, "num_attention_heads": 26}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 8_090_401_280 {
		t.Errorf("Jais2Config's defaults: %d parameters, want 8,090,401,280", got)
	}
}

// jais2 under 4.57.6 is refused (the 5.0.0 wheel is the first with
// models/jais2); heads that do not divide hidden_size are refused naming
// Jais2Config; the names are transformers' (nn.LayerNorm's biases, the
// ungated MLP's up_proj and down_proj).
func TestJais2Config(t *testing.T) {
	tiny := string(readHF(t, "jais2-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.57.6"})
	if err == nil || !strings.Contains(err.Error(), `model_type "jais2" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.6: error %v, want one naming 5.0", err)
	}
	checkEditedRefused(t, strings.Replace(tiny, `"num_key_value_heads": 2`, `"num_key_value_heads": 5`, 1), []configRefusal{
		{"heads 5", `"num_attention_heads": 4`, `"num_attention_heads": 5, "head_dim": 16`, "Jais2Config refuses it"},
	})
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.2.input_layernorm.bias",
		"model.layers.2.self_attn.q_proj.bias", "model.layers.2.self_attn.o_proj.bias",
		"model.layers.2.mlp.up_proj.bias", "model.layers.2.mlp.down_proj.weight",
		"model.layers.2.post_attention_layernorm.weight", "model.norm.bias", "lm_head.weight")
}

// Under transformers 5.0.0, the first release with models/jais2 (the
// wheel unzipped on PYTHONPATH with the packages
// TestMiniCPM3Transformers513 names; torch 2.15.0, the CPU):
//
//	PYTHONPATH=tf5.0.0:deps:nokernels python tools/oracle/hf_block_saved.py sim/testdata/hf/jais2-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// the same bytes as 5.25.0 at 1 and 2 layers, every row.
func TestJais2Transformers50(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved           [2]int64
	}{
		{"fp32", "sdpa", [2]int64{286_212, 468_484}},
		{"fp32", "eager", [2]int64{334_340, 564_740}},
		{"bf16", "sdpa", [2]int64{176_900, 268_548}},
		{"bf16", "eager", [2]int64{233_220, 381_188}},
	} {
		for i, want := range tc.saved {
			if got := hfSaved(t, "jais2-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn, Transformers: "5.0.0"}, false); got != want {
				t.Errorf("5.0.0 %s %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}
