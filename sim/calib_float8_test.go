package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// Float8 rows of public torchtitan runs: Llama 3.1 8B, FSDP2 over 8 or
// 128 H100s (96 GB HBM2e, grandTeton), each block compiled, per-op
// selective checkpointing, with torchao's float8 linears. Memory is
// torchtitan's max_reserved_gib, compared with memsh's peak reserved;
// tokens per second per GPU are compared as the speed-up over the same
// run without float8, a ratio of two of memsh's step times.
//
// Sources:
//
//   - titan: pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md
//     (torchtitan 9dec370, torchao eab345c, December 2024), Tables 1 and 3,
//     rows "FSDP + torch.compile + Float8" (76.8 GiB, 8,532 TPS on 8 GPUs;
//     61.8 GiB, 8,380 TPS on 128) against "FSDP + torch.compile" (77.0
//     GiB, 6,667; 62.0 GiB, 6,514); local batch 2 x 8192. The table does
//     not give the float8 flags: the row is replayed as docs/float8.md at
//     that commit launches it (enable_float8_linear,
//     enable_fsdp_float8_all_gather, precompute_float8_dynamic_scale_for_fsdp:
//     tensorwise scaling with fp8 all-gather); the save list is
//     parallelize_llama.py's at 9dec370, with aten.abs and aten.max.
//     torchao eab345c's tensorwise Float8Linear saved its input and weight
//     in fp8; memsh models the January 2025 unification, which saves the
//     bf16 input (core/float8.go). Under this policy the difference is in
//     the recomputed block only.
//   - torchao: pytorch/ao torchao/float8/README.md "Training benchmarks"
//     (8c81863ba, March 2025; torch 2.7.0a0+gitb98af95, torchao 0.10.0,
//     torchtitan 0.0.2; benchmarks/float8/training/llama3.sh: local batch
//     1, seq 8192, --compile.enable; tensorwise with
//     --float8.enable_fsdp_float8_all_gather and
//     --float8.precompute_float8_dynamic_scale_for_fsdp, rowwise with
//     --float8.recipe_name=rowwise), "Peak Memory (GB)" parsed from
//     torchtitan's "memory: X GiB" log line: bf16 47.65, tensorwise 47.77
//     (7,689.5 TPS against 6,150), rowwise 47.79 (6,768). The save list by
//     then had lost aten.abs (torchtitan 88247277c, #820, February 2025).
//   - #820: that commit's message, same setup (47.77GiB(50.28%): a 95 GiB
//     device), rowwise with aten.abs still in the save list: 58.55 GiB.
type float8Row struct {
	source   string
	gpus     int64
	batch    int64
	float8   core.Float8
	abs      bool    // aten.abs in the save list
	gib      float64 // measured peak reserved, GiB
	speedup  float64 // measured TPS over the same run without float8; 0: none given
	tolerate float64 // the bound on the memory error
}

func float8RowPlan(row float8Row, f8 core.Float8) *core.Plan {
	m := testmodels.Llama(4096, 32, 32, 8, 14336, 128256, "sdpa")
	p := titanPlan(titanRow{gpus: row.gpus, compile: true})
	p.Model, p.Batch = m, row.batch
	p.Float8 = f8
	save := []string{"mm", "attention", "reduce_scatter", "max"}
	if row.abs {
		save = core.DefaultSaveOps()
	}
	p.Checkpoint = core.Checkpoint{Mode: "op", Save: save}
	return p
}

// TestFloat8Rows: every row within 10 %; the speed-ups within 10 %.
//
// Memory: float8 changes little at these rows' peak (the loss's
// backward, where the fp32 logits are live): the compiled blocks keep
// the same bf16 matmul outputs; the fp8 casts live inside one block.
// torchtitan's rows: -3.2 and +0.2 % (+0.6 and +0.8 % with the steady
// step replayed alone, before FSDP2's first step was replayed ahead of it). The 8-GPU rows replay with
// expandable segments, as their launcher sets them (titanRow.expandable:
// torchtitan's run_llama_train.sh, later run_train.sh, which torchao's
// benchmarks/float8/training/llama3.sh runs): the torchao rows land at
// -0.5 % (bf16), -2.0 % (tensorwise) and -0.7 % (rowwise); without them
// they were +9.7, +8.2 and +9.5 % over. Rowwise with aten.abs in the save
// list is the one row float8 moves: the policy recomputes every second
// matmul, whose rowwise casts recompute their amax (aten.amax, not on the
// list) from abs, which the list makes MUST_SAVE: the abs of those
// linears' inputs and weights (k_proj, o_proj, up_proj; the weights
// unsharded, in bf16) is saved, +10.5 GiB over the rowwise row against
// +10.8 measured (-1.1 %).
//
// Time: memsh's speed-ups fall short by 1 to 8 %. The GEMMs run at fp8's
// measured MAMF; rowwise scaled GEMMs are priced like tensorwise ones
// (no published rate), and the casts stream at the copy bandwidth.
func TestFloat8Rows(t *testing.T) {
	tw := core.Float8{Scaling: "tensorwise", AllGather: true}
	rw := core.Float8{Scaling: "rowwise"}
	for _, row := range []float8Row{
		{"titan Table 1, + Float8", 8, 2, tw, true, 76.8, 8532.0 / 6667, 0.10},
		{"titan Table 3, + Float8", 128, 2, tw, true, 61.8, 8380.0 / 6514, 0.10},
		{"torchao, bf16", 8, 1, core.Float8{}, false, 47.65, 0, 0.10},
		{"torchao, tensorwise", 8, 1, tw, false, 47.77, 7689.5 / 6150, 0.10},
		{"torchao, rowwise", 8, 1, rw, false, 47.79, 6768.0 / 6150, 0.10},
		{"#820, rowwise with abs saved", 8, 1, rw, true, 58.55, 0, 0.10},
	} {
		rep := evalPlan(t, float8RowPlan(row, row.float8))
		got := float64(rep.PeakReserved) / (1 << 30)
		d := (got - row.gib) / row.gib
		t.Logf("%s: memsh %.2f GiB reserved, measured %.2f GiB (%+.1f %%)", row.source, got, row.gib, 100*d)
		if math.Abs(d) > row.tolerate {
			t.Errorf("%s: %.2f GiB reserved, measured %.2f GiB (%+.1f %%)", row.source, got, row.gib, 100*d)
		}
		if row.speedup == 0 {
			continue
		}
		base := evalPlan(t, float8RowPlan(row, core.Float8{}))
		s := base.Time.StepSeconds / rep.Time.StepSeconds
		ds := (s - row.speedup) / row.speedup
		t.Logf("%s: memsh speed-up %.3f, measured %.3f (%+.1f %%)", row.source, s, row.speedup, 100*ds)
		if math.Abs(ds) > 0.10 {
			t.Errorf("%s: speed-up %.3f, measured %.3f (%+.1f %%)", row.source, s, row.speedup, 100*ds)
		}
	}
}
