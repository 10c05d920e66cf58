package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
)

// OLMo 2's parameter counts: the hub's safetensors totals of
// allenai/OLMo-2-0425-1B, OLMo-2-1124-7B, OLMo-2-1124-13B and
// OLMo-2-0325-32B (1,484,916,736, 7,298,617,344, 13,716,198,400 and
// 32,234,279,936, as public model lists and loaders' checks quote them;
// the hub itself is not reachable from here), which transformers 5.25.0
// also counts on the meta device for these config.json files.
func TestOlmo2Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"olmo-2-0425-1b.json":  1_484_916_736,
		"olmo-2-1124-7b.json":  7_298_617_344,
		"olmo-2-1124-13b.json": 13_716_198_400,
		"olmo-2-0325-32b.json": 32_234_279_936,
	})
}

// checkParams checks the parameter count of the model each config file
// of sim/testdata/hf builds (sdpa) against want's.
func checkParams(t *testing.T, want map[string]int64) {
	t.Helper()
	for file, n := range want {
		m, err := hf.FromConfig(readHF(t, file), "sdpa")
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if got := m.Params(); got != n {
			t.Errorf("%s: %d parameters, want %d", file, got, n)
		}
	}
}

// What one OLMo 2 decoder layer keeps for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): olmo2-tiny.json (64
// wide, 4 heads of 16, 2 kv heads, intermediate 128), 2 samples of 32
// tokens, a layer's bytes the difference of 2 layers and 1:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/olmo2-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// fp32 sdpa 779,524 - 449,796, eager 875,780 - 497,924; bf16 sdpa
// 558,340 - 335,108, eager 670,980 - 391,428. Per layer: q_norm's and
// k_norm's fp32 inputs (in bf16 their copies), rsqrt and normalised rows
// over all the heads (Olmo2RMSNorm keeps the normalised rows in fp32: the
// weight multiplies before the cast back), the rotary products, the
// kernel's saves, and the post-norms of the attention's and the MLP's
// outputs.
func TestOlmo2LayerSavesAsTransformers(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	tiny := string(readHF(t, "olmo2-tiny.json"))
	saved := func(layers, precision, attn string) int64 {
		m, err := hf.FromConfigOptions([]byte(strings.Replace(tiny, `"num_hidden_layers": 2`, `"num_hidden_layers": `+layers, 1)), hf.Options{Attn: attn})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = cpu, 2, 32
		if p.Precision, err = core.LookupPrecision(precision); err != nil {
			t.Fatal(err)
		}
		return evalPlan(t, p).SavedActivations
	}
	for _, tc := range []struct {
		precision, attn string
		want            int64
	}{
		{"fp32", "sdpa", 779_524 - 449_796},
		{"fp32", "eager", 875_780 - 497_924},
		{"bf16", "sdpa", 558_340 - 335_108},
		{"bf16", "eager", 670_980 - 391_428},
	} {
		if got := saved("2", tc.precision, tc.attn) - saved("1", tc.precision, tc.attn); got != tc.want {
			t.Errorf("%s %s: a layer keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, got, tc.want, got-tc.want)
		}
	}
}

// OLMo 2's, OLMo 3's and OLMoE's q_norm and k_norm normalise all the heads at
// once: tensor parallelism, which splits the heads, is refused, naming it.
func TestWideQKNormRefusesTP(t *testing.T) {
	for _, file := range []string{"olmo2-tiny.json", "olmo3-tiny.json", "olmoe-tiny.json"} {
		m, err := hf.FromConfig(readHF(t, file), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Parallel = core.Parallelism{TP: 2}
		p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 2}
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "q_norm and k_norm over all the heads") {
			t.Errorf("%s tp=2: error %v, want one naming q_norm and k_norm", file, err)
		}
	}
}
