package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// gptNeoCut is gpt_neo-tiny.json cut to its first layers layers
// (num_layers, and attention_types to their types, one entry each), as
// hf_block_saved.py cuts it (cfg.num_hidden_layers = LAYERS: the layers
// take the first LAYERS of the expanded types).
func gptNeoCut(t *testing.T, layers int64) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(readHF(t, "gpt_neo-tiny.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	var types []any
	for _, e := range cfg["attention_types"].([]any) {
		pair := e.([]any)
		for range int(pair[1].(float64)) {
			for _, ty := range pair[0].([]any) {
				types = append(types, []any{[]any{ty}, 1})
			}
		}
	}
	cfg["attention_types"], cfg["num_layers"] = types[:layers], layers
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// gptNeoSaved is what the cut model keeps for backward, 2 samples of 32
// tokens on the CPU, every layer checkpointed with ckpt.
func gptNeoSaved(t *testing.T, layers int64, precision, attn string, ckpt bool) int64 {
	t.Helper()
	m, err := hf.FromConfigOptions(gptNeoCut(t, layers), hf.Options{Attn: attn})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 32
	if p.Precision, err = core.LookupPrecision(precision); err != nil {
		t.Fatal(err)
	}
	if ckpt {
		p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1} // transformers 5: use_reentrant=False
	}
	return evalPlan(t, p).SavedActivations
}

// TestGPTNeoSavesAsTransformers: what autograd keeps in a whole tiny
// GPT-Neo (gpt_neo-tiny.json: hidden 64, 4 heads, max_position_embeddings
// 128, window 16, layers global, local, global), 1 to 3 layers, 2 samples
// of 32 tokens, eager attention, on the CPU with torch 2.15.0 and
// transformers 5.25.0 (4.57.1 on PYTHONPATH with requests,
// huggingface_hub 0.36.0 and tokenizers 0.22.1 beside it: the same fp32
// bytes at 1 and 2 layers, where its logits' upcast is a no-op):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gpt_neo-tiny.json {1,2,3} 2 32 {float32,bfloat16} eager nocache [ckpt]
//
// kept (= saved): fp32 609,028 / 1,117,956 / 1,626,884, bf16 395,268 /
// 707,076 / 1,018,884; with every layer checkpointed, bf16, 2 and 3
// layers: 99,844 / 108,036, and each layer holds until its backward
// what GPTNeoModel hands it (held, at both depths): the (2, 1, 32, 32)
// bf16 float mask, 4,096 bytes, which memsh counts with the saved
// (no position_ids: GPTNeoBlock is called without them). Without checkpointing the harness counts,
// once a layer, the storage of the layer's bool mask buffer (attn.attention.bias,
// [1, 1, 128, 128]: 16,384 bytes), a slice of which torch.where saves:
// memsh holds it among the buffers (nn.Attention.MaskBuffer), so its
// saved bytes are the harness's less 16,384 a layer. attn="sdpa" runs
// eager (no SDPA path).
func TestGPTNeoSavesAsTransformers(t *testing.T) {
	const buffer = 128 * 128
	for _, tc := range []struct {
		precision string
		saved     [3]int64
	}{
		{"fp32", [3]int64{609_028, 1_117_956, 1_626_884}},
		{"bf16", [3]int64{395_268, 707_076, 1_018_884}},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 1)
			want := saved - layers*buffer
			for _, attn := range []string{"eager", "sdpa"} {
				if got := gptNeoSaved(t, layers, tc.precision, attn, false); got != want {
					t.Errorf("%s %s, %d layers: memsh keeps %d bytes, transformers %d less the buffers, %d (%+d)", tc.precision, attn, layers, got, saved, want, got-want)
				}
			}
		}
	}
	const held = 4096
	for i, saved := range []int64{99_844, 108_036} {
		layers, want := int64(i+2), saved+held
		if got := gptNeoSaved(t, layers, "bf16", "eager", true); got != want {
			t.Errorf("bf16 checkpointed, %d layers: memsh keeps %d bytes, transformers %d (%+d)", layers, got, want, got-want)
		}
	}
	// the buffers: one [1, 1, 128, 128] bool mask a layer
	m, err := hf.FromConfig(gptNeoCut(t, 3), "eager")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 32
	if got := evalPlan(t, p).States.Buffers; got != 3*buffer {
		t.Errorf("3 layers: buffers %d bytes, want 3 x 16,384", got)
	}
}

// The parameter counts of gpt_neo-tiny.json and of edits of it are
// transformers 5.25.0's on the meta device (GPTNeoForCausalLM built from
// GPTNeoConfig of the edited keys): the file 174,080; intermediate_size
// 128 124,544; untied 190,464; num_attention_heads and num_hidden_layers
// (GPTNeoConfig's attribute_map names) for num_heads and num_layers
// 174,080; max_position_embeddings 256 182,272. transformers refuses
// attention_types left out (its 24 layers against num_layers 3:
// validate_architecture's ValueError), a "sparse" layer type
// (GPTNeoAttention's NotImplementedError) and num_heads 3 (64 is not a
// multiple: GPTNeoSelfAttention's ValueError); so does memsh, naming the
// key.
//
// gpt-neo-125m.json is EleutherAI/gpt-neo-125M's config.json as quoted in
// public code (a from_params block naming hf_model_name
// "EleutherAI/gpt-neo-125M"; the hub's file is not reachable here):
// 125,198,592 parameters, transformers 5.25.0's count on the meta device
// (the card's "125M"). GPTNeoConfig's defaults (EleutherAI/gpt-neo-1.3B's
// sizes) build 1,315,575,808, transformers 5.25.0's count of
// GPTNeoForCausalLM(GPTNeoConfig()). Before 5.0 it is refused: 5.0.0 is
// the first wheel whose GPTNeoForCausalLM hands the logits to
// loss_function as they are (4.57.1 back to 4.27.0 upcast them,
// lm_logits.to(torch.float32), and cast them back after the loss: two
// logits copies in 16-bit, which memsh does not model), 4.27.0 the first
// whose mask buffer is bool (4.26.0's is uint8, cast to a new bool tensor
// each forward), 4.11.0 the first without local attention by blocks
// (_look_back, from 4.5.0, the first wheel with models/gpt_neo, to
// 4.10.0); modeling_gpt_neo.py of each wheel.
func TestGPTNeoConfig(t *testing.T) {
	tiny := string(readHF(t, "gpt_neo-tiny.json"))
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 174_080},
		{"intermediate_size 128", `"intermediate_size": null`, `"intermediate_size": 128`, 124_544},
		{"untied", `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 190_464},
		{"num_attention_heads", `"num_heads": 4`, `"num_attention_heads": 4`, 174_080},
		{"num_hidden_layers", `"num_layers": 3`, `"num_hidden_layers": 3`, 174_080},
		{"max_position_embeddings 256", `"max_position_embeddings": 128`, `"max_position_embeddings": 256`, 182_272},
	})
	checkEditedRefused(t, tiny, []configRefusal{
		{"attention_types left out", `"attention_types": [[["global", "local"], 1], [["global"], 1]],`, "", "attention_types"},
		{"a sparse layer", `[["global"], 1]`, `[["sparse"], 1]`, "attention_types"},
		{"not a list", `"attention_types": [[["global", "local"], 1], [["global"], 1]]`, `"attention_types": "global"`, "attention_types"},
		{"num_heads 3", `"num_heads": 4`, `"num_heads": 3`, "num_heads"},
		{"both head keys", `"num_heads": 4`, `"num_heads": 4, "num_attention_heads": 4`, "num_attention_heads"},
	})
	for _, tc := range []struct {
		file string
		want int64
	}{{"gpt-neo-125m.json", 125_198_592}} {
		m, err := hf.FromConfig(readHF(t, tc.file), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d", tc.file, got, tc.want)
		}
	}
	d, err := hf.FromConfig([]byte(`{"model_type": "gpt_neo"}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Params(); got != 1_315_575_808 {
		t.Errorf("GPTNeoConfig's defaults: %d parameters, want 1,315,575,808", got)
	}
	_, err = hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", Transformers: "4.57.1"})
	if err == nil || !strings.Contains(err.Error(), `model_type "gpt_neo" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.1: error %v, want one naming 5.0", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager", Transformers: "5.0.0"}); err != nil {
		t.Errorf("transformers 5.0.0: %v", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "flash"); err != nil {
		t.Errorf("flash (GPTNeoFlashAttention2): %v", err)
	}
	checkHasParams(t, tiny, "transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.bias",
		"transformer.h.0.attn.attention.q_proj.weight", "transformer.h.0.attn.attention.out_proj.bias",
		"transformer.h.1.mlp.c_fc.weight", "transformer.h.2.mlp.c_proj.bias", "transformer.ln_f.weight")
}
