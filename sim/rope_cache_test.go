package sim

import (
	"os"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// The rotary embedding's cached cos and sin tables (nn/rope_cache.go),
// hand-counted on a 2-layer Llama with hidden 64 and 4 heads (head_dim
// 16) whose tables cover 256 positions: each table is 256 x 16 values,
// two a layer, four in all. In fp32 (a model built without torch_dtype,
// as Answer.AI's train.py builds its QLoRA model) that is 4 x 16,384 B =
// 65,536 B; in the parameters' bf16 (from_pretrained(torch_dtype=bf16)
// or module.to(bf16)) half of it; none without a cache (transformers 4.41
// and later for Llama). One GPU allocates them with the parameters, and
// FSDP1 moves each with its unit (fsdp1_wrap.go): the same bytes.
func TestRopeCacheBuffers(t *testing.T) {
	for _, c := range []struct {
		name      string
		positions int64
		dt        units.DType
		fsdp1     bool
		want      int64
	}{
		{"none", 0, units.InvalidDType, false, 0},
		{"fp32", 256, units.FP32, false, 65_536},
		{"parameters' bf16", 256, units.InvalidDType, false, 32_768},
		{"fp32 under FSDP1", 256, units.FP32, true, 65_536},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := ropeCached(testmodels.Llama(64, 2, 4, 4, 128, 100, "sdpa"), c.positions, c.dt)
			p := testmodels.LlamaPlan(m, 1, 8, "bf16", "none", "H100-80GB")
			if c.fsdp1 {
				p.Parallel = core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1, SyncStates: true}
			}
			r := evalPlan(t, p)
			if r.States.Buffers != c.want {
				t.Errorf("%d B of buffers, want %d", r.States.Buffers, c.want)
			}
		})
	}
}

// hf_config's rotary tables by transformers version (hf/transformers.go
// ropeCache), hand-counted in bf16: Llama-2 7B (max_position_embeddings
// 4,096, head_dim 128, 32 layers) holds 32 x 2 x 4,096 x 128 x 2 B =
// 67,108,864 B up to 4.40 and none from 4.41; Mistral 7B v0.1 (32,768
// positions) 32 x 2 x 32,768 x 128 x 2 B = 536,870,912 B up to 4.41 and
// none from 4.42.
func TestRopeCacheTransformers(t *testing.T) {
	for _, c := range []struct {
		config, transformers string
		want                 int64
	}{
		{"llama-2-7b.json", "4.40.0", 67_108_864},
		{"llama-2-7b.json", "4.41.0", 0},
		{"mistral-7b-v0.1.json", "4.41.0", 536_870_912},
		{"mistral-7b-v0.1.json", "4.42.0", 0},
	} {
		data, err := os.ReadFile("testdata/hf/" + c.config)
		if err != nil {
			t.Fatal(err)
		}
		m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Transformers: c.transformers})
		if err != nil {
			t.Fatal(err)
		}
		p := testmodels.LlamaPlan(m, 1, 8, "bf16", "none", "H100-80GB")
		p.Phase = core.Eval
		if r := evalPlan(t, p); r.States.Buffers != c.want {
			t.Errorf("%s, transformers %s: %d B of buffers, want %d", c.config, c.transformers, r.States.Buffers, c.want)
		}
	}
}
