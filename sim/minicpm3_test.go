package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What MiniCPM3's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast): minicpm3-tiny.json (64 wide,
// 4 heads, q through a latent of 16, a kv latent of 16, nope 8, rope 4, v
// 12: equal q/k and v widths, so the CPU's SDPA takes its flash kernel as
// CUDA's fused kernels do; MLP 96, vocab 128 tied; scale_emb 12,
// scale_depth 1.4, dim_model_base 16: every scaling off 1), 2 samples of
// 32 tokens, at 1, 2 and 3 layers, sdpa (the latent-attention families run
// no eager path):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minicpm3-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache
//
// The scalings save nothing but the embedding's 0-dim embed_scale buffer
// (4 B in fp32, 2 in bf16: Gemma3TextScaledWordEmbedding's product keeps
// it); the residual products and the division before lm_head are by
// Python floats. param_bytes at 3 layers: 345,216 in fp32 (86,304
// parameters), 172,608 in bf16.
//
// memsh holds embed_scale among the buffers, not the activations
// (nn.Scale.Buffer): the harness's count is memsh's activations and that
// buffer.
func TestMiniCPM3SavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		saved     [3]int64
		buffer    int64
	}{
		{"fp32", [3]int64{378_120, 672_008, 965_896}, 4},
		{"bf16", [3]int64{235_270, 403_206, 571_142}, 2},
	} {
		for i, want := range tc.saved {
			p := hfSavedPlan(t, "minicpm3-tiny.json", i+1, tc.precision, hf.Options{Attn: "sdpa"}, false)
			buf := embedScaleBytes(t, p)
			if got := evalPlan(t, p).SavedActivations + buf; got != want || buf != tc.buffer {
				t.Errorf("%s, %d layers: memsh keeps %d bytes and embed_scale %d, transformers %d (%+d) with embed_scale %d", tc.precision, i+1, got-buf, buf, want, got-want, tc.buffer)
			}
		}
	}
}

// The parameters on the meta device (transformers 5.25.0; the harness's
// fp32 param_bytes / 4 for the tiny file), and of edits of it:
//
//	/work/venv-t/bin/python - FILE... : sum(p.numel() for p in cls(AutoConfig.for_model(**raw)).parameters()) on torch.device("meta")
//
// q_lora_rank null 90,096 (one q_proj, never biased) and with
// attention_bias 90,348 (q_a_proj's absent, kv_a_proj_with_mqa's 20 and
// o_proj's 64 a layer: q_proj unbiased, as in every MLA class);
// attention_bias and mlp_bias 87,372; v_head_dim null 90,144 (v 16 =
// hidden / heads: 4 x 4 x 16 x (16 + 64) more); v_head_dim left out and
// the head untied 98,336 (8,192 more: lm_head's 128 x 64).
// MiniCPM3Config()'s defaults, its docstring's checkpoint
// openbmb/MiniCPM3-4B (62 layers of 2560, 40 heads, q_lora_rank 768,
// kv_lora_rank 256, nope 64, rope 32, v 64, MLP 6400, 73,448 tied
// embeddings): 4,073,875,968, the card's "4B"
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AutoModelForCausalLM.from_config(t.MiniCPM3Config()).parameters()))"
//
// (the hub's config.json and weights index are not reachable here: the
// count is the one transformers builds from the class's defaults).
func TestMiniCPM3Params(t *testing.T) {
	checkParams(t, map[string]int64{"minicpm3-tiny.json": 86_304})
	tiny := string(readHF(t, "minicpm3-tiny.json"))
	checkEditedParams(t, tiny, []configEdit{
		{"q_lora_rank null", `"q_lora_rank": 16`, `"q_lora_rank": null`, 90_096},
		{"q_lora_rank null, attention_bias", `"q_lora_rank": 16`, `"q_lora_rank": null, "attention_bias": true`, 90_348},
		{"attention_bias, mlp_bias", `"scale_emb": 12`, `"scale_emb": 12, "attention_bias": true, "mlp_bias": true`, 87_372},
		{"nulls", `"v_head_dim": 12`, `"v_head_dim": null, "x": 0`, 90_144},
	})
	untied := strings.Replace(strings.Replace(tiny, `"v_head_dim": 12,`, "", 1), `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 1)
	checkEditedParams(t, untied, []configEdit{{"v_head_dim left out, untied", `"scale_depth": 1.4`, `"scale_depth": null, "dim_model_base": null`, 98_336}})
	m, err := hf.FromConfig([]byte(`{"model_type": "minicpm3", "architectures": ["MiniCPM3ForCausalLM"], "vocab_size": 73448,
 "hidden_size": 2560, "num_hidden_layers": 62, "num_attention_heads": 40}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 4_073_875_968 {
		t.Errorf("MiniCPM3Config's defaults: %d parameters, want 4,073,875,968", got)
	}
}

// minicpm3 under 5.12.1 is refused (the 5.13.0 wheel is the first with
// models/minicpm3); eager attention, attention_dropout, a null scale_emb, a
// scaling that is not positive and heads that do not divide hidden_size
// are refused naming the key; the names are transformers'.
func TestMiniCPM3Config(t *testing.T) {
	tiny := string(readHF(t, "minicpm3-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.12.1"})
	if err == nil || !strings.Contains(err.Error(), `model_type "minicpm3" needs transformers 5.13 or later`) {
		t.Errorf("transformers 5.12.1: error %v, want one naming 5.13", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "eager"); err == nil || !strings.Contains(err.Error(), "eager") {
		t.Errorf("eager: error %v, want a refusal", err)
	}
	checkEditedRefused(t, tiny, []configRefusal{
		{"attention_dropout", `"scale_emb": 12`, `"scale_emb": 12, "attention_dropout": 0.1`, "attention_dropout"},
		{"scale_emb null", `"scale_emb": 12`, `"scale_emb": null`, "scale_emb"},
		{"scale_depth 0", `"scale_depth": 1.4`, `"scale_depth": 0`, "scale_depth"},
		{"dim_model_base -1", `"dim_model_base": 16`, `"dim_model_base": -1`, "dim_model_base"},
		{"heads 5", `"num_attention_heads": 4`, `"num_attention_heads": 5`, "hidden_size"},
	})
	checkHasParams(t, tiny, "model.embed_tokens.weight", "model.layers.2.self_attn.q_a_proj.weight",
		"model.layers.2.self_attn.q_a_layernorm.weight", "model.layers.2.self_attn.kv_a_proj_with_mqa.weight",
		"model.layers.2.self_attn.kv_a_layernorm.weight", "model.layers.2.self_attn.kv_b_proj.weight",
		"model.layers.2.mlp.gate_proj.weight", "model.norm.weight")
}

// With every layer checkpointed (use_reentrant=False), fp32:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minicpm3-tiny.json {1,2,3} 2 32 float32 sdpa nocache ckpt held
//
// saved 99,592, 115,976 and 132,360 (each layer's 2 x 32 x 64 fp32 input
// more, embed_scale's 4 B among them); held 1,280 at every depth: the
// rotary cos and sin ((1, 32, 4) fp32 each, qk_rope_head_dim wide) and
// position_ids ((1, 32) int64), which the checkpointed layers' partials
// hold (core.OutsideRegions), counted by memsh with the activations.
func TestMiniCPM3CheckpointSavesAsTransformers(t *testing.T) {
	const held = 2*512 + 256
	for i, want := range [3]int64{99_592, 115_976, 132_360} {
		p := hfSavedPlan(t, "minicpm3-tiny.json", i+1, "fp32", hf.Options{Attn: "sdpa"}, true)
		buf := embedScaleBytes(t, p)
		if got := evalPlan(t, p).SavedActivations + buf; got != want+held {
			t.Errorf("%d layers: %d saved with embed_scale, want %d (%+d)", i+1, got, want+held, got-want-held)
		}
	}
}

// Under transformers 5.13.0, the first release with models/minicpm3 (the
// wheel unzipped on PYTHONPATH with huggingface_hub 1.33.0, tokenizers
// 0.22.1, httpx, httpcore, h11, anyio, sniffio, certifi and idna beside it,
// and the installed kernels package hidden: 5.13's hub_kernels cannot
// build its LayerRepository with it; torch 2.15.0, the CPU):
//
//	PYTHONPATH=tf5.13.0:deps:nokernels python tools/oracle/hf_block_saved.py sim/testdata/hf/minicpm3-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache
//
// the same bytes as 5.25.0 (fp32 378,120 / 672,008 / 965,896, bf16
// 235,270 / 403,206 / 571,142): 5.13's MiniCPM3Attention makes the key
// with torch.cat where 5.25's copies into new_empty, neither saving
// anything, and pads v for flash in the attention where 5.25 pads it in
// integrations/flash_attention.py (nn.MLA's doc).
func TestMiniCPM3Transformers513(t *testing.T) {
	for _, tc := range []struct {
		precision string
		saved     [3]int64
	}{
		{"fp32", [3]int64{378_120, 672_008, 965_896}},
		{"bf16", [3]int64{235_270, 403_206, 571_142}},
	} {
		for i, want := range tc.saved {
			p := hfSavedPlan(t, "minicpm3-tiny.json", i+1, tc.precision, hf.Options{Attn: "sdpa", Transformers: "5.13.0"}, false)
			if got := evalPlan(t, p).SavedActivations + embedScaleBytes(t, p); got != want {
				t.Errorf("5.13.0 %s, %d layers: memsh keeps %d bytes with embed_scale, transformers %d (%+d)", tc.precision, i+1, got, want, got-want)
			}
		}
	}
}
