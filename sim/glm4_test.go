package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// GLM-4-9B-0414's parameters: 9,400,279,040, which transformers 5.25.0
// counts on the meta device for glm-4-9b-0414.json
// (Glm4ForCausalLM(config) under torch.device("meta"), summing numel) and
// llama.cpp reports as n_params for unsloth's GLM-4.6V-Flash BF16 GGUF,
// whose text model has these sizes (a public llama-server model list;
// the hub itself is not reachable from here).
func TestGLM4Params(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "glm-4-9b-0414.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(9_400_279_040); got != want {
		t.Errorf("%d parameters, transformers %d", got, want)
	}
}

// What one GLM-4 decoder layer keeps for backward and the whole step's
// saved bytes, against transformers 5.25.0 on PyTorch 2.15.0 (the CPU,
// no autocast): glm4-tiny.json (64 wide, 4 heads of 16, 2 kv heads,
// intermediate 128, half of each head rotated), 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/glm4-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/glm4-tiny.json {1,2} 2 32 bfloat16 sdpa nocache ckpt
//
// Per layer: the four RMS norms' inputs and rsqrt, the layer's own
// repeat_interleaved cos and sin (half a head wide), the o_proj copy of
// the kernel's head-major output (the rope's cat), the kernel's saves and
// the gated MLP's.
func TestGLM4SavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		ckpt            bool
		one, two        int64
	}{
		{"fp32", "sdpa", false, 480_516, 845_060},
		{"fp32", "eager", false, 512_260, 908_548},
		{"bf16", "sdpa", false, 315_652, 531_716},
		{"bf16", "eager", false, 363_780, 627_972},
		// ckpt (every layer checkpointed, use_reentrant=False): a layer
		// keeps its input, [2, 32, 64] in bf16, and recomputes its own
		// cos and sin; the step also holds rotary_emb's pair, 2 x (1, 32,
		// 8) in bf16, and position_ids, (1, 32) int64, which the
		// checkpoints keep as an input out of the harness's pack hook's
		// sight (TestGraniteCheckpointSavesAsTransformers).
		{"bf16", "sdpa", true, 107_780 + 1_024 + 256, 115_972 + 1_024 + 256},
	} {
		one := graniteSaved(t, "glm4-tiny.json", 1, tc.precision, tc.attn, tc.ckpt)
		two := graniteSaved(t, "glm4-tiny.json", 2, tc.precision, tc.attn, tc.ckpt)
		if got, want := two-one, tc.two-tc.one; got != want {
			t.Errorf("%s %s ckpt=%v: a layer keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, tc.ckpt, got, want, got-want)
		}
		if one != tc.one {
			t.Errorf("%s %s ckpt=%v: one layer's step saves %d bytes, transformers %d (%+d)", tc.precision, tc.attn, tc.ckpt, one, tc.one, one-tc.one)
		}
	}
}

// glm4 under a release before models/glm4 is refused, naming the release
// that builds it.
func TestGLM4NeedsItsRelease(t *testing.T) {
	_, err := hf.FromConfigOptions(readHF(t, "glm4-tiny.json"), hf.Options{Attn: "sdpa", Transformers: "4.50.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "glm4" needs transformers 4.51 or later`) {
		t.Errorf("transformers 4.50.3: error %v, want one naming 4.51", err)
	}
	if _, err := hf.FromConfigOptions(readHF(t, "glm4-tiny.json"), hf.Options{Attn: "sdpa", Transformers: "4.51.3"}); err != nil {
		t.Errorf("transformers 4.51.3: %v", err)
	}
}
