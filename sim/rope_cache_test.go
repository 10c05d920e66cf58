package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
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
