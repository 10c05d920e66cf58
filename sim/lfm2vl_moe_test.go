package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// TestLFM2VLMoETextAsLFM2MoE: an LFM2-VL whose text model is an LFM2-MoE
// (lfm2_vl-moe-tiny.json: its text_config is lfm2_moe-tiny.json without
// "architectures") runs that text model as transformers 5 builds it,
// Lfm2MoeModel's 3-D experts through experts_implementation, so a text
// step saves what lfm2_moe-tiny.json's does, the figures measured for it
// (lfm2_test.go); before 5.0 there is no lfm2_moe to build.
func TestLFM2VLMoETextAsLFM2MoE(t *testing.T) {
	vl := hf.Options{Attn: "sdpa", Processor: lfm2VLProcessor("")}
	for _, precision := range []string{"fp32", "bf16"} {
		for _, ckpt := range []bool{false, true} {
			got := hfSaved(t, "lfm2_vl-moe-tiny.json", 0, precision, vl, ckpt)
			want := hfSaved(t, "lfm2_moe-tiny.json", 0, precision, hf.Options{Attn: "sdpa"}, ckpt)
			if got != want {
				t.Errorf("%s ckpt=%v: the LFM2-VL's text step saves %d B, lfm2_moe's %d B", precision, ckpt, got, want)
			}
		}
	}
	_, err := hf.FromConfigOptions(readHF(t, "lfm2_vl-moe-tiny.json"), hf.Options{Attn: "sdpa", Processor: lfm2VLProcessor(""), Transformers: "4.57.1"})
	if err == nil || !strings.Contains(err.Error(), `"lfm2_moe" needs transformers 5.0`) {
		t.Errorf("transformers 4.57.1: got %v, want lfm2_moe refused", err)
	}
}
