package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// BitNet's parameters (BitNetForCausalLM, transformers 5.25.0, meta
// device): bitnet-tiny.json (64 wide, 4 layers, 4 heads, 2 kv heads, MLP
// 160, vocab 256, tied) builds 189,888: Llama's with attn_sub_norm (64) and
// ffn_sub_norm (160) in every layer; bitnet-defaults.json, BitNetConfig's
// defaults (2560 wide, intermediate 6912, 30 layers of 20 heads, 5 kv
// heads, vocab 128,256, untied: the sizes written out, memsh reading no
// default for them) 2,741,155,840. No released config.json was reachable
// from here to check (microsoft/bitnet-b1.58-2B-4T's sizes are the
// class's defaults; its card's "2B" a rounding).
func TestBitNetParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"bitnet-tiny.json":     189_888,
		"bitnet-defaults.json": 2_741_155_840,
	})
}

// What BitNet's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast): bitnet-tiny.json, 2 samples of
// 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/bitnet-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's layer with attn_sub_norm over the attention output (its input
// and rstd kept, o_proj's input the normed rows) and the MLP's squared
// ReLU gate times up, normed by ffn_sub_norm before down_proj.
func TestBitNetSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved           [3]int64
	}{
		{"fp32", "sdpa", [3]int64{548_100, 976_132, 1_404_164}},
		{"fp32", "eager", [3]int64{596_228, 1_072_388, 1_548_548}},
		{"bf16", "sdpa", [3]int64{369_924, 638_212, 906_500}},
		{"bf16", "eager", [3]int64{418_052, 734_468, 1_050_884}},
	} {
		for i, want := range tc.saved {
			if got := hfSaved(t, "bitnet-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn}, false); got != want {
				t.Errorf("%s %s, %d layers: %d saved, want %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}

// bitnet before 4.52 is refused (4.51.3 has no models/bitnet); every
// bitnet quantization_config is refused: bitlinear (the default) and
// offline autobitlinear as inference only, online autobitlinear (BitNet's
// quantization-aware training) as not modelled; heads whose width is not
// hidden_size are refused (attn_sub_norm is hidden_size wide).
func TestBitNetConfig(t *testing.T) {
	tiny := string(readHF(t, "bitnet-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.51.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "bitnet" needs transformers 4.52 or later`) {
		t.Errorf("transformers 4.51.3: error %v, want one naming 4.52", err)
	}
	for _, tc := range []struct{ edit, want string }{
		{`"quantization_config": {"quant_method": "bitnet"}`, "BitLinear's ternary weights packed four to a uint8 buffer, without gradient are inference only"},
		{`"quantization_config": {"quant_method": "bitnet", "linear_class": "autobitlinear"}`, "offline AutoBitLinear's pre-quantized weights, frozen (requires_grad False) are inference only"},
		{`"quantization_config": {"quant_method": "bitnet", "linear_class": "autobitlinear", "quantization_mode": "online"}`, "online AutoBitLinear (quantization-aware training"},
		{`"quantization_config": {"quant_method": "bitnet", "linear_class": "ternary"}`, `"quantization_config.linear_class" must be "bitlinear" or "autobitlinear"`},
		{`"head_dim": 8`, `"head_dim" (8) times num_attention_heads (4) must be hidden_size (64)`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, `"hidden_act": "relu2"`, `"hidden_act": "relu2", `+tc.edit, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %s", tc.edit, err, tc.want)
		}
	}
}
