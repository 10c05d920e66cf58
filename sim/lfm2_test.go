package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// LFM2's parameters, which transformers 5.25.0 counts on the meta device
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel, tied weights once), each the model card's exact figure:
// 354,483,968 (LFM2-350M), 742,489,344 (700M), 1,170,340,608 (1.2B),
// 2,569,272,320 (2.6B). The 350M, 700M and 1.2B files carry the published
// config.json's fields (block_ff_dim 6656, 10240, 12288, made 4608, 6912,
// 8192 wide by block_auto_adjust_ff_dim; full_attn_idxs 2, 5, 8, 10, 12,
// 14); the 2.6B file transformers 5's (intermediate_size 10752 as is,
// block_auto_adjust_ff_dim false, layer_types with attention at 2, 5, 9,
// 13, 17, 21, 24 and 27), as the published LFM2.5-2.6B config.json sets
// them; the hub is not reachable from here. lfm2-tiny.json: 209,760.
func TestLFM2Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"lfm2-350m.json": 354_483_968,
		"lfm2-700m.json": 742_489_344,
		"lfm2-1.2b.json": 1_170_340_608,
		"lfm2-2.6b.json": 2_569_272_320,
		"lfm2-tiny.json": 209_760,
	})
}

// What LFM2's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, causal-conv1d not installed):
// lfm2-tiny.json (64 wide, 4 heads of 16, 2 kv heads, w1/w3 256 wide,
// conv_L_cache 3, layer_types conv, full_attention, conv), 2 samples of 32
// tokens, at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/lfm2-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// A conv layer keeps in_proj's input and output ([tokens, 3 x 64]: B * x
// and C * conv save its views), B * x (the conv's input), F.conv1d's
// padded output (34 positions a sample: C * conv saves its [:, :, :32]
// view) and out_proj's contiguous input; an attention layer Qwen3's
// (q_layernorm and k_layernorm per head). Under full checkpointing:
// TestCheckpointHoldsForwardOnceValues.
func TestLFM2SavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "lfm2-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{576_260, 1_042_180, 1_502_468}},
		{"fp32", "eager", [3]int64{576_260, 1_090_308, 1_550_596}},
		{"bf16", "sdpa", [3]int64{346_372, 609_540, 856_324}},
		{"bf16", "eager", [3]int64{346_372, 665_860, 912_644}},
	})
}

// savedDepths is what hf_block_saved.py measured at 1, 2 and 3 layers.
type savedDepths struct {
	precision, attn string
	saved           [3]int64
}

// eagerSaved is what hf_block_saved.py's eagerexperts run keeps for one
// precision at consecutive layer counts.
type eagerSaved struct {
	precision string
	saved     []int64
}

// checkEagerExpertsSaved holds memsh, with the experts as transformers'
// eager loop (experts="eager"), to the harness's bytes for file cut to
// first, first+1, ... layers, less the views the loop takes of
// gate_up_proj and down_proj for experts e > 0, which the harness counts
// and which save nothing (views elements an MoE layer;
// TestFlexOlmoExpertsAsTransformers); the first dense layers have none, and
// a cut of dense layers alone runs without experts= (which it refuses).
func checkEagerExpertsSaved(t *testing.T, file string, first, dense int, views int64, rows []eagerSaved) {
	t.Helper()
	for _, tc := range rows {
		for i, saved := range tc.saved {
			layers := first + i
			moe := int64(max(layers-dense, 0))
			dt, err := units.ParseDType(tc.precision)
			if err != nil {
				t.Fatal(err)
			}
			want := saved - dt.Bytes(moe*views)
			o := hf.Options{Attn: "sdpa", Experts: "eager"}
			if moe == 0 {
				o.Experts = ""
			}
			if got := hfSaved(t, file, layers, tc.precision, o, false); got != want {
				t.Errorf("%s %s eager experts, %d layers: memsh keeps %d bytes, transformers %d, %d without the parameter views (%+d)", file, tc.precision, layers, got, saved, want, got-want)
			}
		}
	}
}

// checkSavedDepths holds memsh to rows for file cut to 1, 2 and 3
// layers (graniteSaved: layer_types cut with it).
func checkSavedDepths(t *testing.T, file string, rows []savedDepths) {
	t.Helper()
	for _, tc := range rows {
		for i, want := range tc.saved {
			if got := graniteSaved(t, file, i+1, tc.precision, tc.attn, false); got != want {
				t.Errorf("%s %s %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", file, tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}

// lfm2 under a release before models/lfm2 is refused, naming the
// release; the legacy keys win as Lfm2Config pops them (block_ff_dim over
// intermediate_size, tie_embedding over tie_word_embeddings); without
// layer_types, full_attn_idxs picks the attention layers, and without
// either every layer is one; the module names are transformers'.
func TestLFM2Config(t *testing.T) {
	tiny := string(readHF(t, "lfm2-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.53.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "lfm2" needs transformers 4.54 or later`) {
		t.Errorf("transformers 4.53.2: error %v, want one naming 4.54", err)
	}
	// A conv layer: in_proj 64 x 192, conv 64 x 3, out_proj 64 x 64; an
	// attention layer: q and out_proj 64 x 64, k and v 64 x 32, two norms
	// of 16. Each layer: two norms of 64 and an MLP of 3 x 64 x 256.
	const conv, attn, ffn, embed = 64*192 + 64*3 + 64*64, 2*64*64 + 2*64*32 + 2*16, 2*64 + 3*64*256, 256 * 64
	checkEditedParams(t, tiny, []configEdit{
		{"the file", "", "", 2*conv + attn + 3*ffn + embed + 64},
		{"intermediate_size loses to block_ff_dim", `"block_ff_dim": 384`, `"block_ff_dim": 384, "intermediate_size": 999`, 2*conv + attn + 3*ffn + embed + 64},
		{"tie_embedding false unties", `"tie_embedding": true`, `"tie_embedding": false, "tie_word_embeddings": true`, 2*conv + attn + 3*ffn + 2*embed + 64},
		{"full_attn_idxs", `"layer_types": ["conv", "full_attention", "conv"]`, `"full_attn_idxs": [0, 2]`, conv + 2*attn + 3*ffn + embed + 64},
		{"every layer attention", `"layer_types": ["conv", "full_attention", "conv"]`, `"full_attn_idxs": null`, 3*attn + 3*ffn + embed + 64},
		{"no auto adjust", `"block_auto_adjust_ff_dim": true`, `"block_auto_adjust_ff_dim": false`, 2*conv + attn + 3*(2*64+3*64*384) + embed + 64},
		{"conv_bias", `"conv_bias": false`, `"conv_bias": true`, 2*(conv+5*64) + attn + 3*ffn + embed + 64},
	})
	m, err := hf.FromConfig([]byte(tiny), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.conv.in_proj.weight", "model.layers.0.conv.conv.weight", "model.layers.0.conv.out_proj.weight",
		"model.layers.1.self_attn.q_layernorm.weight", "model.layers.1.self_attn.k_layernorm.weight", "model.layers.1.self_attn.out_proj.weight",
		"model.layers.0.feed_forward.w1.weight", "model.layers.0.feed_forward.w3.weight", "model.layers.0.feed_forward.w2.weight",
		"model.layers.0.operator_norm.weight", "model.layers.0.ffn_norm.weight", "model.embedding_norm.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"layer_types": ["conv", "full_attention", "conv"]`, `"layer_types": ["conv", "sliding_attention", "conv"]`, `"layer_types" names an attention type memsh does not know`},
		{`"layer_types": ["conv", "full_attention", "conv"]`, `"layer_types": ["conv", "full_attention"]`, `"layer_types" must list one attention type per layer (3)`},
		{`"layer_types": ["conv", "full_attention", "conv"]`, `"full_attn_idxs": [3]`, `"full_attn_idxs" must list layer indices in 0..2`},
		{`"num_key_value_heads": 2`, `"num_key_value_heads": 3`, `"num_key_value_heads" (3) must divide the 4 attention heads`},
		{`"block_ff_dim": 384`, `"block_ff_dim": 1`, `"block_ff_dim" gives Lfm2MLP no width`},
		{`"conv_L_cache": 3`, `"conv_L_cache": 0`, `"conv_L_cache"`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %s", tc.to, err, tc.want)
		}
	}
}
