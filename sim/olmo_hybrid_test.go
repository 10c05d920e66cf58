package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// Olmo-Hybrid-7B's parameters: 7,430,870,688, which transformers 5.25.0
// counts on the meta device for olmo-hybrid-7b.json: OlmoHybridConfig's
// defaults, documented as allenai/Olmo-Hybrid-7B's (its auto_docstring
// checkpoint) and spelt out by transformers' own OLMo-Hybrid speed test
// (3840 wide, 32 layers, full attention at every fourth, 30 heads of 128,
// 30 Gated DeltaNet key and value heads of 96 and 192, intermediate
// 11008, vocabulary 100352, untied head), rope_theta null as the release
// sets it. olmo_hybrid-tiny.json: 179,312. Each:
//
//	with torch.device("meta"): AutoModelForCausalLM.from_config(AutoConfig.for_model(**json.load(f)))
func TestOlmoHybridParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"olmo-hybrid-7b.json":   7_430_870_688,
		"olmo_hybrid-tiny.json": 179_312,
	})
}

// What OLMo Hybrid keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, neither flash-linear-attention
// nor causal-conv1d installed: torch_chunk_gated_delta_rule and F.conv1d,
// linear_attn="torch"): olmo_hybrid-tiny.json (64 wide; layer_types
// linear_attention, full_attention, linear_attention; 2 key heads of 16
// and 4 value heads of 32; rope_parameters null, so the default RoPE), 2
// samples of 32 tokens (one 64-token chunk), at 2 and 3 layers (a single
// layer is one kind alone, which OlmoHybridConfig refuses):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/olmo_hybrid-tiny.json {2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// and with rope_parameters {"rope_theta": null, "rope_type": "default"}
// (NoPE, as Olmo-Hybrid-7B). Under full checkpointing (ckpt held mask):
// the layers' inputs, and held position_ids (256), the rotary pair (2 x
// 2,048) with RoPE, eager's float mask (8,192 fp32, 4,096 bf16).
func TestOlmoHybridSavesAsTransformers(t *testing.T) {
	nope := map[string]any{"rope_parameters": map[string]any{"rope_theta": nil, "rope_type": "default"}}
	for _, tc := range []struct {
		set             map[string]any
		precision, attn string
		ckpt            bool
		saved           [2]int64 // at 2 and 3 layers
	}{
		{nil, "fp32", "sdpa", false, [2]int64{2_027_812, 3_605_828}},
		{nil, "fp32", "eager", false, [2]int64{2_075_940, 3_653_956}},
		{nil, "bf16", "sdpa", false, [2]int64{1_730_084, 3_125_060}},
		{nil, "bf16", "eager", false, [2]int64{1_786_404, 3_181_380}},
		{nil, "fp32", "sdpa", true, [2]int64{148_740 + 4_352, 165_124 + 4_352}},
		{nil, "fp32", "eager", true, [2]int64{148_740 + 12_544, 165_124 + 12_544}},
		{nil, "bf16", "sdpa", true, [2]int64{124_164 + 4_352, 132_356 + 4_352}},
		{nil, "bf16", "eager", true, [2]int64{124_164 + 8_448, 132_356 + 8_448}},
		{nope, "fp32", "sdpa", false, [2]int64{2_023_716, 3_601_732}},
		{nope, "fp32", "eager", false, [2]int64{2_071_844, 3_649_860}},
		{nope, "bf16", "sdpa", false, [2]int64{1_725_988, 3_120_964}},
		{nope, "bf16", "eager", false, [2]int64{1_782_308, 3_177_284}},
		{nope, "fp32", "sdpa", true, [2]int64{148_740 + 256, 165_124 + 256}},
		{nope, "fp32", "eager", true, [2]int64{148_740 + 8_448, 165_124 + 8_448}},
	} {
		for i, want := range tc.saved {
			layers := int64(i + 2)
			p := hfOraclePlan(t, ropeConfig(t, "olmo_hybrid-tiny.json", layers, tc.set), hf.Options{Attn: tc.attn, LinearAttn: "torch"}, tc.precision)
			if tc.ckpt {
				p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			}
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("rope %v %s %s ckpt %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.set == nil, tc.precision, tc.attn, tc.ckpt, layers, got, want, got-want)
			}
		}
	}
}

// olmo_hybrid under a release before models/olmo_hybrid is refused; a
// model of one layer kind is refused as OlmoHybridConfig refuses it;
// without layer_types, full attention at every fourth layer; the
// module names are transformers'.
func TestOlmoHybridConfig(t *testing.T) {
	tiny := string(readHF(t, "olmo_hybrid-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.2.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "olmo_hybrid" needs transformers 5.3 or later`) {
		t.Errorf("transformers 5.2.0: error %v, want one naming 5.3", err)
	}
	for _, tc := range []struct{ types, want string }{
		{`["linear_attention", "linear_attention", "linear_attention"]`, "at least one full_attention layer"},
		{`["full_attention", "full_attention", "full_attention"]`, "at least one linear_attention layer"},
		{`["linear_attention", "sliding_attention", "full_attention"]`, `names an attention type memsh does not know (got the string "sliding_attention"`},
	} {
		cfg := strings.Replace(tiny, `["linear_attention", "full_attention", "linear_attention"]`, tc.types, 1)
		if _, err := hf.FromConfig([]byte(cfg), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("layer_types %s: error %v, want %q", tc.types, err, tc.want)
		}
	}
	// A linear layer: q_proj, k_proj 64 x 32, v_proj, g_proj 64 x 128,
	// a_proj, b_proj 64 x 4, o_proj 128 x 64, conv1d 192 x 4, A_log,
	// dt_bias 4, o_norm 32; an attention layer: q, o 64 x 64, k, v 64 x
	// 32, q_norm 64, k_norm 32. Each: an MLP of 3 x 64 x 128, two norms.
	const linear, attn = 2*64*32 + 2*64*128 + 2*64*4 + 128*64 + 192*4 + 2*4 + 32, 2*64*64 + 2*64*32 + 64 + 32
	const layer, outer = 3*64*128 + 2*64, 2*256*64 + 64
	if linear*2+attn+3*layer+outer != 179_312 {
		t.Fatalf("hand count %d, transformers 179,312", linear*2+attn+3*layer+outer)
	}
	// Without layer_types, 4 layers: linear, linear, linear, full.
	cfg := strings.Replace(strings.Replace(tiny, `"layer_types": ["linear_attention", "full_attention", "linear_attention"],`, ``, 1), `"num_hidden_layers": 3`, `"num_hidden_layers": 4`, 1)
	m, err := hf.FromConfig([]byte(cfg), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(3*linear+attn+4*layer+outer); got != want {
		t.Errorf("default layer_types: %d parameters, want %d", got, want)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.linear_attn.q_proj.weight", "model.layers.0.linear_attn.g_proj.weight",
		"model.layers.2.linear_attn.o_norm.weight", "model.layers.2.linear_attn.o_proj.weight", "model.layers.1.linear_attn.conv1d.weight",
		"model.layers.3.self_attn.q_norm.weight", "model.layers.3.post_feedforward_layernorm.weight", "model.layers.0.input_layernorm.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
}
