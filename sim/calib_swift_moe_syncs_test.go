package sim

import "testing"

// Megatron-Core's host syncs by setting (nn/moe_megatron_sync.go,
// December 2026, session 48): every row here syncs once a MoE layer's
// forward (and recompute) at "before_ep_alltoall" (ep > 1), on the
// permute, as before; the Qwen3-30B-A3B run had no --moe_permute_fusion
// (ms-swift 3.4 had no such argument; Megatron's default is off), so its
// unfused permute's masked_select and its unpermute's (core_r0.11.0
// weights there, moe_utils.py l.274 and l.341) read counts on the host
// too: 3 syncs a layer, 576 a step (48 layers, 2 micro-batches, forward
// and recompute) against 192. host_sync 3 -> 9 ms, 4.48 -> 4.49 s (-53.3
// -> -53.2 %); 52.8 -> 52.5 GiB (-12.0 -> -12.5 %: the unpermute's sync
// comes after the combine all-to-all, so what ProcessGroupNCCL's
// record_stream held is free a layer sooner, replay/nccl_record.go). The
// 9 ms are the syncs' latency almost alone (576 x 14.9 µs = 8.6 ms): the
// segments on both sides of each sync are GPU-bound in memsh, so the
// syncs take no overlap away and are not the gap.
//
// Not priced: core_r0.11.0's blocking copy in preprocess (a fourth sync,
// l.466, one latency more), and the unfused path's own aten ops: the
// chunk sort splits the rows into experts x expert tp chunks and
// concatenates them (torch.split, torch.cat, moe_utils.py l.364-365),
// forward and backward. Counted on the CPU run at 128 chunks
// (sim/testdata/megatron_moe_host.jsonl, core_r0.11.0: 94 router + 642
// dispatch + 585 combine forward, 1,665 backward aten ops) they would
// take this row to 7.58 s (-21 %) at memsh's 12.4 µs an aten op: fewer
// ops than its 256 chunks make, each priced as an average Hugging Face
// aten op where these are mostly views. That count is not the row's
// chunks, so it is not priced; a run of tools/oracle/megatron_moe_host.py
// at a second chunk count would give its slope. April's tp 2 ep 4 reading
// (bf16Router) ran unfused as well: 2.41 s either way (-19.7 -> -19.6 %),
// 65.2 -> 65.1 GiB.
//
// TestMegatronSwiftSyncs holds the rows' programs to that count: the
// Qwen3-30B-A3B row's 48 layers 3 syncs each a forward, the tp 2 ep 4
// row's 24 layers (permute fusion) 1 each.
func TestMegatronSwiftSyncs(t *testing.T) {
	for _, c := range []struct {
		row  string
		want int64 // a forward's syncs
	}{
		{"Qwen3-30B-A3B, tp 2, ep 8, dp 8, two nodes", 48 * 3},
		{"Qwen1.5-MoE-A2.7B, tp 2, ep 4, dp 4, selective recompute", 24 * 1},
	} {
		prog, err := MegatronSwiftRowPlan(t, c.row).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for i := range prog.Ops {
			n += int64(prog.Ops[i].Syncs)
		}
		if n != c.want {
			t.Errorf("%s: %d host syncs a forward, want %d", c.row, n, c.want)
		}
	}
}
