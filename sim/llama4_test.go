package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Llama 4's text model, counted against transformers 5.17.0 on the meta
// device: Llama4ForCausalLM(Llama4TextConfig(**text_config)) and
// Llama4ForConditionalGeneration(Llama4Config(**config)),
// sum(p.numel() for p in model.parameters()) (torch 2.15.0; the script
// is tools/oracle/llama4_params.py).
//
//   - llama-4-scout-17b-16e.json: meta-llama/Llama-4-Scout-17B-16E's
//     config.json as transformers 4.51.0 printed it (hidden 5120, 48
//     layers all MoE, 16 experts of 8192 and one shared, top-1, every
//     fourth layer NoPE, qk norm, vocab 202,048), with
//     attn_temperature_tuning true for 4's (transformers 5.17's strict
//     Llama4TextConfig refuses the int): text model 107,769,861,120;
//     with the vision tower and projector 108,641,793,536, the model
//     card's "109B total parameters" (17.17 B active: one expert of 16
//     and the shared one, embedding and head both counted, the card's
//     "17B activated").
//   - llama-4-maverick-17b-128e.json: Maverick's (128 experts on every
//     other layer, interleave_moe_layer_step 2, no qk norm): text model
//     400,711,848,960; with vision 401,583,781,376, the card's "400B
//     total" (17.18 B active).
//   - llama4-tiny.json: 4 layers of 64, MoE on layers 1 and 3, 4 experts:
//     195,648.
func TestLlama4Params(t *testing.T) {
	for _, tc := range []struct {
		file, arch string
		want       int64
	}{
		{"llama-4-scout-17b-16e.json", "Llama4ForCausalLM", 107_769_861_120},
		{"llama-4-maverick-17b-128e.json", "Llama4ForCausalLM", 400_711_848_960},
		{"llama4-tiny.json", "", 195_648},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Arch: tc.arch})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.file, got, tc.want, got-tc.want)
		}
	}
}

// Parameter names and shapes as transformers 5.17.0 names them (the tiny
// config's named_parameters()).
func TestLlama4Names(t *testing.T) {
	want := map[string][]int64{
		"model.embed_tokens.weight":                                  {128, 64},
		"model.layers.0.self_attn.q_proj.weight":                     {64, 64},
		"model.layers.0.self_attn.k_proj.weight":                     {32, 64},
		"model.layers.0.feed_forward.gate_proj.weight":               {96, 64},
		"model.layers.0.feed_forward.down_proj.weight":               {64, 96},
		"model.layers.1.feed_forward.experts.gate_up_proj":           {4, 64, 96},
		"model.layers.1.feed_forward.experts.down_proj":              {4, 48, 64},
		"model.layers.1.feed_forward.router.weight":                  {4, 64},
		"model.layers.1.feed_forward.shared_expert.gate_proj.weight": {48, 64},
		"model.layers.1.feed_forward.shared_expert.down_proj.weight": {64, 48},
		"model.layers.3.post_attention_layernorm.weight":             {64},
		"model.norm.weight":                                          {64},
		"lm_head.weight":                                             {128, 64},
	}
	m, err := hf.FromConfigOptions(readHF(t, "llama4-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := tinyPlan(t, m).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range prog.Params {
		if shape, ok := want[p.Name]; ok {
			seen++
			if !equalShape(p.Shape, shape) {
				t.Errorf("%s: shape %v, want %v", p.Name, p.Shape, shape)
			}
		}
		if strings.Contains(p.Name, "norm") && strings.Contains(p.Name, "self_attn") {
			t.Errorf("%s: Llama 4's qk norm has no weight", p.Name)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d named parameters", seen, len(want))
	}
}

// What hf_config refuses for Llama 4, each error naming why.
func TestLlama4Refusals(t *testing.T) {
	for _, tc := range []struct {
		file, arch, attn, version, want string
	}{
		{"llama-4-scout-17b-16e.json", "", "flash", "", `no flash-attention path for model_type "llama4"`},
		{"llama4-tiny.json", "", "flash", "", `no flash-attention path for model_type "llama4_text"`},
		{"llama4-tiny.json", "", "sdpa", "4.50.3", `model_type "llama4_text" needs transformers 4.51 or later`},
	} {
		_, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: tc.attn, Arch: tc.arch, Transformers: tc.version})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s %s: got %v, want %s", tc.file, tc.attn, tc.version, err, tc.want)
		}
	}
}
