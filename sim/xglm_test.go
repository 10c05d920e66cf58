package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// TestXGLMSavesAsTransformers: what autograd keeps in a whole tiny XGLM
// (xglm-tiny.json: d_model 64, 4 heads, ffn_dim 128, the dropouts 0), 1 to
// 3 layers, 2 samples of 32 tokens, on the CPU with torch 2.15.0 and
// transformers 5.25.0 (XGLMAttention, its only attention):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/xglm-tiny.json {1,2,3} 2 32 {float32,bfloat16,float16} eager nocache [ckpt held]
//
// kept (= saved): fp32 363,016 / 626,188 / 889,360, bf16 214,792 /
// 346,380 / 477,968, fp16 247,560 / 411,916 / 576,272 (its softmax in
// fp32, cast back: the fp32 probabilities saved): besides GPT-2's tensors, each layer's masked scores
// (2, 4, 32, 32) and the 0-dim fp32 floor that torch.max saves (fp32 in
// bf16 too: torch.full's default dtype); the scaled q copy is what the
// product saves. attn="sdpa" runs eager (no SDPA path). With every layer
// checkpointed, 2 and 3 layers: fp32 140,804 at 2 layers, bf16 103,684 /
// 111,876, and the layers hold nothing more (held 0: no position_ids, the
// sinusoidal rows added before them).
func TestXGLMSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "xglm-tiny.json", []savedDepths{
		{"fp32", "eager", [3]int64{363_016, 626_188, 889_360}},
		{"bf16", "eager", [3]int64{214_792, 346_380, 477_968}},
		{"bf16", "sdpa", [3]int64{214_792, 346_380, 477_968}},
		{"fp16", "eager", [3]int64{247_560, 411_916, 576_272}},
	})
	for _, tc := range []struct {
		precision string
		layers    int
		want      int64
	}{{"fp32", 2, 140_804}, {"bf16", 2, 103_684}, {"bf16", 3, 111_876}} {
		if got := graniteSaved(t, "xglm-tiny.json", tc.layers, tc.precision, "eager", true); got != tc.want {
			t.Errorf("%s checkpointed, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.layers, got, tc.want, got-tc.want)
		}
	}
}

// With dropout and attention_dropout 0.1 (xglm-tiny-dropout.json, the
// published checkpoints' values),
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/xglm-tiny-dropout.json {1,2} 2 32 {float32,bfloat16} eager nocache
//
// fp32 477,704 / 839,180, bf16 272,136 / 452,876 on the CPU, whose
// dropout keeps a noise tensor in the input's dtype (checkCPUDropout): a
// layer's masks are the probabilities' (2 x 4 heads x 32 x 32), the
// attention output's and fc2's (2 x 32 x 64 each, functional dropouts),
// the embeddings' once; the product then saves the dropped
// probabilities besides the softmax's output.
func TestXGLMDropoutMasks(t *testing.T) {
	checkCPUDropout(t, "xglm-tiny-dropout.json", 8192+2*4096, 4096, []cpuDropout{
		{"fp32", 4, 477_704, 839_180},
		{"bf16", 2, 272_136, 452_876},
	})
}

// The parameter counts of xglm-tiny.json and of edits of it are
// transformers 5.25.0's on the meta device (XGLMForCausalLM built from
// XGLMConfig of the edited keys): the file 116,928; ffn_dim 256 166,464;
// untied 133,312; d_model, attention_heads and num_layers for
// hidden_size, num_attention_heads and num_hidden_layers (XGLMConfig's
// attribute_map) 116,928. attention_heads 3 is refused by transformers
// (XGLMAttention's ValueError) and memsh; activation_dropout, layerdrop
// and add_cross_attention (167,232 parameters in transformers: the
// encoder_attn layers a causal LM never runs) are refused as not
// modelled.
//
// xglm-1.7b.json is facebook/xglm-1.7B's config.json as quoted in public
// code (a fairseq conversion script's "Should match the config file from
// HF" block; the hub's file is not reachable here): 1,732,907,008
// parameters, transformers 5.25.0's count on the meta device (the card's
// 1.7B). XGLMConfig's defaults (facebook/xglm-564M's sizes) build
// 564,463,616. Before 4.49 it is refused: 4.49.0 is the first wheel whose
// XGLMForCausalLM calls loss_function (4.48.0 makes a shifted copy of the
// labels and runs CrossEntropyLoss); 4.57.1 (on PYTHONPATH with requests,
// huggingface_hub 0.36.0 and tokenizers 0.22.1) keeps the same bytes as
// 5.25.0 at 2 layers, bf16, with and without dropout (346,380 and
// 452,876).
func TestXGLMConfig(t *testing.T) {
	tiny := string(readHF(t, "xglm-tiny.json"))
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 116_928},
		{"ffn_dim 256", `"ffn_dim": 128`, `"ffn_dim": 256`, 166_464},
		{"untied", `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 133_312},
		{"hidden_size", `"d_model": 64`, `"hidden_size": 64`, 116_928},
		{"num_attention_heads", `"attention_heads": 4`, `"num_attention_heads": 4`, 116_928},
		{"num_layers", `"num_hidden_layers": 3`, `"num_layers": 3`, 116_928},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"attention_heads 3", `"attention_heads": 4`, `"attention_heads": 3`, "attention_heads"},
		{"activation_dropout", `"activation_dropout": 0.0`, `"activation_dropout": 0.1`, "activation_dropout"},
		{"layerdrop", `"layerdrop": 0.0`, `"layerdrop": 0.1`, "layerdrop"},
		{"cross-attention", `"layerdrop": 0.0`, `"layerdrop": 0.0, "add_cross_attention": true`, "add_cross_attention"},
		{"both width keys", `"d_model": 64`, `"d_model": 64, "hidden_size": 64`, "hidden_size"},
	})
	for _, tc := range []struct {
		config string
		want   int64
	}{{string(readHF(t, "xglm-1.7b.json")), 1_732_907_008}, {`{"model_type": "xglm"}`, 564_463_616}} {
		m, err := hf.FromConfig([]byte(tc.config), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%.40s: %d parameters, want %d", tc.config, got, tc.want)
		}
	}
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", Transformers: "4.48.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "xglm" needs transformers 4.49 or later`) {
		t.Errorf("transformers 4.48.0: error %v, want one naming 4.49", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", Transformers: "4.49.0"}); err != nil {
		t.Errorf("transformers 4.49.0: %v", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "flash"); err == nil || !strings.Contains(err.Error(), "flash") {
		t.Errorf("flash: error %v, want a refusal", err)
	}
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.out_proj.weight",
		"model.layers.1.self_attn_layer_norm.weight", "model.layers.2.fc1.weight", "model.layers.2.final_layer_norm.bias", "model.layer_norm.weight")
}
