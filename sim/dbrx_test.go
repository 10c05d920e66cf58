package sim

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// dbrxSaved evaluates dbrx-tiny.json cut to layers blocks (n_layers,
// DbrxConfig's num_hidden_layers).
func dbrxSaved(t *testing.T, config string, layers int, precision, attn string) (saved, params, grads int64) {
	t.Helper()
	cfg := regexp.MustCompile(`"n_layers": \d+`).ReplaceAllString(config, `"n_layers": `+strconv.Itoa(layers))
	r := evalPlan(t, hfOraclePlan(t, []byte(cfg), hf.Options{Attn: attn}, precision))
	return r.SavedActivations, r.States.Params, r.States.Grads
}

// What DBRX's blocks keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// dbrx-tiny.json (d_model 64, 4 heads of 16, 2 kv heads, clip_qkv 8; 8
// experts of 32, 2 a token, moe_jitter_eps 0.01, the weights L1-normed),
// 2 samples of 32 tokens, at 1, 2 and 3 blocks:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/dbrx-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// The harness counts, besides, the views DbrxExperts takes of w1, v1 and
// w2 for experts e > 0 (data_ptr misses them): each parameter's whole
// storage once a block, 3 x 8 x 32 x 64 elements, left out of the
// comparison as for LongCat-Flash (TestLongcatFlashSavesAsTransformers).
// param_bytes and grad_bytes at 3 blocks: 796,416 (fp32), 398,208 (bf16).
func TestDbrxSavesAsTransformers(t *testing.T) {
	tiny := string(readHF(t, "dbrx-tiny.json"))
	views := map[string]int64{"fp32": 3 * 8 * 32 * 64 * 4, "bf16": 3 * 8 * 32 * 64 * 2}
	states := map[string]int64{"fp32": 796_416, "bf16": 398_208}
	for _, tc := range []struct {
		precision, attn string
		saved           [3]int64
	}{
		{"fp32", "sdpa", [3]int64{621_316, 1_178_628, 1_735_940}},
		{"fp32", "eager", [3]int64{644_868, 1_225_732, 1_806_596}},
		{"bf16", "sdpa", [3]int64{326_020, 606_724, 887_428}},
		{"bf16", "eager", [3]int64{370_052, 694_788, 1_019_524}},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 1)
			want := saved - layers*views[tc.precision]
			got, params, grads := dbrxSaved(t, tiny, i+1, tc.precision, tc.attn)
			if got != want {
				t.Errorf("%s %s, %d blocks: memsh keeps %d bytes, transformers %d less the weight views, %d (%+d)", tc.precision, tc.attn, layers, got, saved, want, got-want)
			}
			if layers == 3 && (params != states[tc.precision] || grads != states[tc.precision]) {
				t.Errorf("%s %s: parameters %d B, gradients %d B, want %d", tc.precision, tc.attn, params, grads, states[tc.precision])
			}
		}
	}
}

// DBRX under 5.12.0 is refused (its DbrxExperts reshape by
// ffn_hidden_size; families.go); what 5.25.0 cannot train or DbrxConfig
// refuses is refused naming the key; experts= is refused (DbrxExperts is
// not run by experts_implementation); the sizes and names are
// transformers'.
func TestDbrxConfig(t *testing.T) {
	tiny := string(readHF(t, "dbrx-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.12.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "dbrx" needs transformers 5.15 or later`) {
		t.Errorf("transformers 5.12.0: error %v, want one naming 5.15", err)
	}
	_, err = hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Experts: "eager"})
	if err == nil || !strings.Contains(err.Error(), "no MoE blocks run by experts_implementation") {
		t.Errorf("experts=\"eager\": error %v, want a refusal", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"clip_qkv": 8.0, `, ``, `"attn_config.clip_qkv" is null or absent`},
		{`"clip_qkv": 8.0`, `"clip_qkv": null`, `"attn_config.clip_qkv" is null or absent`},
		{`"clip_qkv": 8.0`, `"clip_qkv": -1`, `attn_config.clip_qkv`},
		{`"kv_n_heads": 2`, `"kv_n_heads": 3`, `attn_config.kv_n_heads`},
		{`"tie_word_embeddings": false`, `"tie_word_embeddings": true`, `tie_word_embeddings`},
		{`"ffn_act_fn": {"name": "silu"}`, `"ffn_act_fn": {"name": "mish"}`, `ffn_config.ffn_act_fn.name`},
		{`"ffn_act_fn": {"name": "silu"}`, `"ffn_act_fn": "silu"`, `ffn_config.ffn_act_fn`},
		{`"moe_top_k": 2`, `"moe_top_k": 9`, `ffn_config.moe_top_k`},
		{`"d_model": 64`, `"d_model": 66`, `d_model`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: error %v, want one naming %s", tc.from, tc.to, err, tc.want)
		}
	}
	// 3 blocks: Wqkv 64 x (64 + 2 x 2 x 16), out_proj 64 x 64, two
	// norms of 64, the router 8 x 64, w1, v1 and w2 of 8 x 32 x 64 each;
	// wte and lm_head 100 x 64, norm_f 64.
	const block = 64*128 + 64*64 + 2*64 + 8*64 + 3*8*32*64
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 3*block + 2*100*64 + 64},
		{"ffn_hidden_size 48", `"ffn_hidden_size": 32`, `"ffn_hidden_size": 48`, 3*(block+3*8*16*64) + 2*100*64 + 64},
		{"one kv head by default", `"kv_n_heads": 2, `, ``, 3*(block-2*16*64) + 2*100*64 + 64},
		{"DbrxFFNConfig's defaults", `"ffn_hidden_size": 32, "moe_num_experts": 8, "moe_top_k": 2, `, ``, 3*(block-8*64-3*8*32*64+4*64+3*4*3584*64) + 2*100*64 + 64},
	})
	// dbrx-instruct.json: DBRX Instruct's (and Base's) published sizes
	// (40 blocks of 6144, 48 heads, 8 kv heads, 16 experts of 10,752, 4
	// a token, 100,352 untied embeddings), moe_jitter_eps and
	// moe_normalize_expert_weights written as floats, since 5.25.0's
	// strict DbrxFFNConfig refuses the published file's ints 0 and 1:
	// 131,596,523,520, transformers 5.25.0's count on the meta device
	// (the card's 132B total).
	m, err := hf.FromConfig(readHF(t, "dbrx-instruct.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 131_596_523_520 {
		t.Errorf("DBRX Instruct: %d parameters, want 131,596,523,520", got)
	}
	checkHasParams(t, tiny, "transformer.wte.weight", "transformer.blocks.0.norm_attn_norm.attn.Wqkv.weight",
		"transformer.blocks.1.ffn.router.layer.weight", "transformer.blocks.2.ffn.experts.mlp.v1",
		"transformer.blocks.0.norm_attn_norm.norm_2.weight", "transformer.norm_f.weight", "lm_head.weight")
}

// The router's options against the same harness (fp32, sdpa, 1 and 2
// blocks, the weight views left out as above), dbrx-tiny.json with one
// key changed (written to a temporary file):
//
//	python tools/oracle/hf_block_saved.py /tmp/dbrx-VARIANT.json {1,2} 2 32 float32 sdpa nocache keepfp32
//
// "moe_jitter_eps": null saves no noise (16,384 B a block less);
// "moe_normalize_expert_weights": null divides by no norm (768 B: the
// top-k values and their [tokens, 1] norm); 2.0 (an L2 norm) keeps what
// 1.0 does (torch.norm keeps its input and result, the division's
// operands).
func TestDbrxRouterOptionsAsTransformers(t *testing.T) {
	tiny := string(readHF(t, "dbrx-tiny.json"))
	const views = 3 * 8 * 32 * 64 * 4
	for _, tc := range []struct {
		from, to string
		saved    [2]int64
	}{
		{`"moe_jitter_eps": 0.01`, `"moe_jitter_eps": null`, [2]int64{604_932, 1_145_860}},
		{`"moe_normalize_expert_weights": 1.0`, `"moe_normalize_expert_weights": null`, [2]int64{620_548, 1_177_092}},
		{`"moe_normalize_expert_weights": 1.0`, `"moe_normalize_expert_weights": 2.0`, [2]int64{621_316, 1_178_628}},
	} {
		cfg := strings.Replace(tiny, tc.from, tc.to, 1)
		for i, saved := range tc.saved {
			want := saved - int64(i+1)*views
			if got, _, _ := dbrxSaved(t, cfg, i+1, "fp32", "sdpa"); got != want {
				t.Errorf("%s, %d blocks: memsh keeps %d bytes, transformers %d less the weight views, %d (%+d)", tc.to, i+1, got, saved, want, got-want)
			}
		}
	}
}
