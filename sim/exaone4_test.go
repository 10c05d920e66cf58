package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// EXAONE 4.0's parameters, which transformers 5.25.0 counts on the meta
// device for exaone-4.0-32b.json and exaone-4.0-1.2b.json
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel; the files carry the published sizes, the hub not reachable from
// here): 32,003,216,384 for the 32B (64 layers of 5120, 40 heads of 128, 8
// kv heads, intermediate 27392, 102,400 untied embeddings: without them
// 30,954,640,384, the card's "30.95B without embeddings") and
// 1,279,391,488 for the 1.2B (30 layers of 2048, 32 heads of 64, 8 kv
// heads, intermediate 4096, tied: 1,069,676,288 without the embeddings,
// the card's 1.07B). exaone4-tiny.json: 143,904.
func TestExaone4Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"exaone-4.0-32b.json":  32_003_216_384,
		"exaone-4.0-1.2b.json": 1_279_391_488,
		"exaone4-tiny.json":    143_904,
	})
}

// What EXAONE 4.0's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// exaone4-tiny.json (64 wide, 4 heads of 16, 2 kv heads, intermediate
// 128, sliding_window 16; layer 0 sliding with rope, layer 1 full without),
// 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/exaone4-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Per layer Qwen3's attention saves (q_norm, k_norm over each head) with
// the norms after each sublayer (Llama's RMSNorm); the full layer rotates
// nothing. Under full checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestExaone4SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"exaone4-tiny.json", "fp32", "sdpa", 475_396, 806_148},
		{"exaone4-tiny.json", "fp32", "eager", 498_948, 877_828},
		{"exaone4-tiny.json", "bf16", "sdpa", 309_508, 505_092},
		{"exaone4-tiny.json", "bf16", "eager", 353_540, 605_444},
	})
}

// exaone4's layers: layer_types, else every sliding_window_pattern-th
// layer full (default 4); with sliding_window null every layer rotates;
// the configs transformers 5.25.0 cannot build are refused naming the key;
// a release before 4.54 is refused.
func TestExaone4Config(t *testing.T) {
	tiny := string(readHF(t, "exaone4-tiny.json"))
	noTypes := strings.Replace(tiny, `"layer_types": ["sliding_attention", "full_attention", "sliding_attention"],`, "", 1)
	ropeByLayer := func(cfg string) string {
		m, err := hf.FromConfig([]byte(cfg), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		stack := layerStack(t, m)
		var rope []bool
		for i := int64(0); i < stack.Count(); i++ {
			core.Walk(stack.Block(i), "", func(_ string, l core.Layer) {
				if a, ok := l.(*nn.Attention); ok {
					rope = append(rope, a.Rope)
				}
			})
		}
		return fmt.Sprint(rope)
	}
	for _, tc := range []struct {
		name, cfg string
		rope      string
	}{
		{"layer_types", tiny, "[true false true]"},
		{"pattern 4 (default)", noTypes, "[true true true]"},
		{"pattern 2", strings.Replace(noTypes, `"sliding_window": 16,`, `"sliding_window": 16, "sliding_window_pattern": 2,`, 1), "[true false true]"},
		{"no window", strings.Replace(tiny, `"sliding_window": 16,`, `"sliding_window": null,`, 1), "[true true true]"},
	} {
		if got := ropeByLayer(tc.cfg); got != tc.rope {
			t.Errorf("%s: rope by layer %s, want %s", tc.name, got, tc.rope)
		}
	}
	for _, tc := range []struct{ cfg, key string }{
		{strings.Replace(noTypes, `"sliding_window": 16,`, `"sliding_window": 16, "sliding_window_pattern": "LLLG",`, 1), `"sliding_window_pattern" must be an integer without layer_types`},
		{strings.Replace(noTypes, `"sliding_window": 16,`, `"sliding_window": null,`, 1), `"layer_types" must be given when sliding_window is null`},
	} {
		if _, err := hf.FromConfig([]byte(tc.cfg), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("error %v, want one with %q", err, tc.key)
		}
	}
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.53.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "exaone4" needs transformers 4.54 or later`) {
		t.Errorf("transformers 4.53.3: error %v, want one naming 4.54", err)
	}
}
