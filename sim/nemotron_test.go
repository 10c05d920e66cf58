package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Nemotron's parameters on the meta device (transformers 5.25.0):
// nemotron-tiny.json 90,752 (64 wide, 4 heads of 16, 2 kv heads, MLP 128,
// untied; each LayerNorm1P a weight and a bias), nemotron-tiny-bias.json
// 91,520 (attention_bias and mlp_bias: 2 x (64 + 32 + 32 + 64 + 128 +
// 64) more); minitron-4b-base.json 4,190,509,056 for Minitron-4B-Base's
// published sizes (3072 wide, 32 layers, 24 heads of 128, 8 kv heads, MLP
// 9216, vocab 256000; as TensorRT-LLM's Nemotron_4_4B_CONFIG copies
// them), the card's 4B.
func TestNemotronParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"nemotron-tiny.json":      90_752,
		"nemotron-tiny-bias.json": 91_520,
		"minitron-4b-base.json":   4_190_509_056,
	})
}

// What Nemotron's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/nemotron-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/nemotron-tiny-bias.json {1,2} 2 32 float32 {sdpa,eager} nocache
//
// Llama's attention with half of each head rotated (the rest cat back),
// an up_proj, relu2, down_proj MLP, and LayerNorm1P's weight + 1.0, a new
// [hidden] tensor each norm saves beside its input, mean and rstd.
func TestNemotronSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"nemotron-tiny.json", "fp32", "sdpa", 301_316, 500_484},
		{"nemotron-tiny.json", "fp32", "eager", 333_060, 563_972},
		{"nemotron-tiny.json", "bf16", "sdpa", 184_452, 284_548},
		{"nemotron-tiny.json", "bf16", "eager", 232_580, 380_804},
		{"nemotron-tiny-bias.json", "fp32", "sdpa", 301_316, 500_484},
		{"nemotron-tiny-bias.json", "fp32", "eager", 333_060, 563_972},
	})
}

// With every layer checkpointed (use_reentrant=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/nemotron-tiny.json {1,2} 2 32 {float32,bfloat16} sdpa nocache ckpt
//
// fp32 116,484 / 132,868, bf16 91,524 / 99,716: each layer keeps its
// input. The step holds besides what the harness's pack hook does not
// see, as Llama's does (TestGraniteCheckpointSavesAsTransformers): the
// rotary cos and sin each checkpointed layer is handed, here half a head
// wide ((1, 32, 8) each: 2,048 bytes in fp32, 1,024 in bf16), and the
// position_ids (256 bytes), once whatever the depth; with held at 1
// layer the harness lists exactly these, 2,304 and 1,280 bytes.
func TestNemotronCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		one, two  int64 // hf_block_saved.py at 1 and 2 layers
		tables    int64 // the rotary pair and position_ids
	}{
		{"fp32", 116_484, 132_868, 2048 + 256},
		{"bf16", 91_524, 99_716, 1024 + 256},
	} {
		one, two := graniteSaved(t, "nemotron-tiny.json", 1, tc.precision, "sdpa", true), graniteSaved(t, "nemotron-tiny.json", 2, tc.precision, "sdpa", true)
		if one != tc.one+tc.tables || two != tc.two+tc.tables {
			t.Errorf("%s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.precision, one, one-tc.one-tc.tables, two, two-tc.two-tc.tables)
		}
	}
}

// nemotron under 4.44 is refused (4.43.4 has no models/nemotron);
// partial_rotary_factor defaults to 0.5 and is read from rope_parameters
// too; out of (0, 1] it is refused naming the key.
func TestNemotronConfig(t *testing.T) {
	tiny := string(readHF(t, "nemotron-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.43.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "nemotron" needs transformers 4.44 or later`) {
		t.Errorf("transformers 4.43.4: error %v, want one naming 4.44", err)
	}
	saved := func(cfg string) int64 {
		t.Helper()
		m, err := hf.FromConfig([]byte(cfg), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		return cpuSavedModel(t, m, 2, 32, false)
	}
	half := saved(tiny)
	if got := saved(strings.Replace(tiny, `"partial_rotary_factor": 0.5,`, "", 1)); got != half {
		t.Errorf("partial_rotary_factor left out: %d bytes kept, want 0.5's %d", got, half)
	}
	if got := saved(strings.Replace(tiny, `"partial_rotary_factor": 0.5,`, `"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},`, 1)); got != half {
		t.Errorf("rope_parameters' partial_rotary_factor 0.5: %d bytes kept, want %d", got, half)
	}
	if got := saved(strings.Replace(tiny, `"partial_rotary_factor": 0.5`, `"partial_rotary_factor": 1.0`, 1)); got == half {
		t.Errorf("partial_rotary_factor 1.0 keeps what 0.5 keeps (%d bytes)", got)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"partial_rotary_factor": 0.5`, `"partial_rotary_factor": 1.5`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"partial_rotary_factor" must be in (0, 1]`) {
		t.Errorf("partial_rotary_factor 1.5: error %v", err)
	}
}
