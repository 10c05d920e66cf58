package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// torchtitan's published benchmarks (pytorch/torchtitan,
// benchmarks/llama3_h100_202412_torchtitan.md, torchtitan 9dec370 with
// torch 1963fc8, December 2024), measured on Grand Teton H100s (96 GB
// HBM2e). "Memory(GiB)" is torchtitan's max_reserved_gib
// (torchtitan/components/metrics.py: torch.cuda.memory_stats()
// "reserved_bytes.all.peak"), so memsh's peak reserved is compared.
// The model is torchtitan's Llama 3.1 (models/llama/__init__.py: the 8B
// has dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14,336, vocabulary
// 128,256; its output is upcast to fp32 for the loss), trained with AdamW
// over fp32 parameters under FSDP2 with MixedPrecisionPolicy(param_dtype=
// bf16, reduce_dtype=fp32) (train_configs, config_manager.py defaults):
// memsh's bf16-mixed with fsdp=True.

// TestTorchtitanFSDPOverCP is Table 2: Llama 3.1 8B on 8 GPUs, local
// batch 1, full activation checkpointing, FSDP over dp_shard x cp
// (parallelize_llama.py: the "dp_shard_cp" mesh), sequences growing with
// cp so that every rank holds 32,768 tokens. Sharding over dp alone put
// the 131,072-token row at 111 GiB (+32 %).
//
// memsh lands 8-9 % under every row, the same gap on each: every rank
// holds 32,768 tokens and the same shard of the states, so the gap is in
// what cp does not change. memsh's peak is the loss's backward, where the
// fp32 logits of 32,768 tokens (15.7 GiB) and their gradient are live.
// The runs also used torch.compile and Float8 linears, which memsh does
// not model; with full checkpointing both change only the block being
// recomputed, which is not live at that peak, so they do not explain the
// gap either: it is unexplained.
func TestTorchtitanFSDPOverCP(t *testing.T) {
	m := testmodels.Llama(4096, 32, 32, 8, 14336, 128256, "flash")
	for _, row := range []struct {
		dp, cp, seq int64
		gib         float64
	}{
		{8, 1, 32768, 83.9},
		{4, 2, 65536, 84.2},
		{2, 4, 131072, 84.0},
		{1, 8, 262144, 84.5},
	} {
		p := testmodels.LlamaPlan(m, 1, row.seq, "bf16-mixed", "full", "H100-80GB")
		p.Parallel = core.Parallelism{DP: row.dp, CP: row.cp, FSDP: true}
		r := evalPlan(t, p)
		got := float64(r.PeakReserved) / (1 << 30)
		d := (got - row.gib) / row.gib
		if math.Abs(d) > 0.10 {
			t.Errorf("FSDP %d, CP %d, seq %d: %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.dp, row.cp, row.seq, got, row.gib, 100*d)
		}
		t.Logf("FSDP %d, CP %d, seq %d: %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.dp, row.cp, row.seq, got, row.gib, 100*d)
	}
}
