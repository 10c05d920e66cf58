package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Lara-4-Mini's parameters on the meta device (transformers 5.25.0,
// torch 2.15.0): lara_mini-tiny.json 259,152 (64 wide, 5 layers: linear,
// sliding, linear, full, sliding; 4 heads of 16 over 2 kv heads; Gated
// DeltaNets of 2 key heads and 4 value heads of 16; 4 experts of 32, 2 a
// token, a shared expert of 48; 256 tied embeddings), with
// attention_bias 259,728, untied 275,536; lara_mini-defaults.json
// 7,281,684,672, LaraMiniConfig()'s defaults (34 layers of 1024 in the
// default pattern, 16 heads of 128 over 4 kv heads, 128 experts of 512, 4
// a token, a shared expert of 512, 151,936 tied embeddings), whose
// docstring names translated/Lara-4-Mini-Base (its config.json was not
// at hand).
func TestLaraMiniParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"lara_mini-tiny.json":     259_152,
		"lara_mini-defaults.json": 7_281_684_672,
	})
	tiny := string(readHF(t, "lara_mini-tiny.json"))
	for _, tc := range []struct {
		from, to string
		want     int64
	}{
		{`"attention_bias": false`, `"attention_bias": true`, 259_728},
		{`"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 275_536},
	} {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err != nil || m.Params() != tc.want {
			t.Errorf("%s: %v, %v parameters, want %d", tc.to, err, m, tc.want)
		}
	}
}

// What Lara-4-Mini's layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast; flash-linear-attention
// and causal-conv1d not installed, so the Gated DeltaNet runs
// transformers' torch chunk kernel: linear_attn="torch"), 2 samples of 32
// tokens, 1 to 5 layers (linear, sliding, linear, full, sliding):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/lara_mini-tiny.json {1,2,3,4,5} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// kept: fp32 sdpa 1,510,452 / 1,925,444 / 3,319,924 / 3,706,244 /
// 4,117,140, eager 1,510,452 / 1,948,996 / 3,343,476 / 3,777,924 /
// 4,212,372; bf16 sdpa 1,370,740 / 1,658,116 / 2,920,820 / 3,193,860 /
// 3,479,188, eager 1,370,740 / 1,702,148 / 2,964,852 / 3,294,212 /
// 3,623,572. In bf16 each layer's router keeps weight.float(), a [4, 64]
// fp32 copy (1,024 bytes), which the harness counts and memsh keeps with
// the parameters' copies (core.CatParams), not in saved_activations: the
// bf16 rows are memsh's figure plus 1,024 a layer. param_bytes and
// grad_bytes at 5 layers: fp32 1,036,608, bf16 518,304.
func TestLaraMiniSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		kept            [5]int64
		copies          int64 // the routers' fp32 weight copies a layer
	}{
		{"fp32", "sdpa", [5]int64{1_510_452, 1_925_444, 3_319_924, 3_706_244, 4_117_140}, 0},
		{"fp32", "eager", [5]int64{1_510_452, 1_948_996, 3_343_476, 3_777_924, 4_212_372}, 0},
		{"bf16", "sdpa", [5]int64{1_370_740, 1_658_116, 2_920_820, 3_193_860, 3_479_188}, 4 * 64 * 4},
		{"bf16", "eager", [5]int64{1_370_740, 1_702_148, 2_964_852, 3_294_212, 3_623_572}, 4 * 64 * 4},
	} {
		for i, want := range tc.kept {
			r := evalPlan(t, hfSavedPlan(t, "lara_mini-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn, LinearAttn: "torch"}, false))
			if got := r.SavedActivations + int64(i+1)*tc.copies; got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d bytes (+ %d of router weight copies), transformers %d (%+d)", tc.precision, tc.attn, i+1, r.SavedActivations, int64(i+1)*tc.copies, want, got-want)
			}
		}
	}
	for _, tc := range []struct {
		precision     string
		params, grads int64
	}{{"fp32", 1_036_608, 1_036_608}, {"bf16", 518_304, 518_304}} {
		r := evalPlan(t, hfSavedPlan(t, "lara_mini-tiny.json", 5, tc.precision, hf.Options{Attn: "sdpa", LinearAttn: "torch"}, false))
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B, gradients %d B, want %d and %d", tc.precision, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// lara_mini under 5.24 is refused (5.23.0 has no models/lara_mini; unzip
// -l); a layer type it does not know is refused naming the key.
func TestLaraMiniConfig(t *testing.T) {
	tiny := string(readHF(t, "lara_mini-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.23.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "lara_mini" needs transformers 5.24 or later`) {
		t.Errorf("transformers 5.23.0: error %v, want one naming 5.24", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"full_attention"`, `"chunked_attention"`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"layer_types" names a layer type memsh does not know`) {
		t.Errorf("chunked_attention: error %v", err)
	}
}
