package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// TestFSDP2OneGPUMeasuredH200 replays FSDP2 on one H200, measured
// (sim/testdata/cuda_h200/fsdp1.jsonl, tools/oracle/cuda_fsdp1.py; torch
// 2.11, NCCL 2.28.9): Llama-3.2-1B from its config, torchtitan's wrapping
// (fully_shard on each decoder layer, then the root) with
// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) over fp32
// parameters, AdamW foreach, a one-rank NCCL group, 4 steps at batch 2, 4
// and 8 x 2048 (one process, the batches one after another). The loop
// holds `out` through the backward (keep_logits). FSDP2 has no one-rank
// shortcut: its all-gather copies and reduce-scatter run as on many ranks,
// and the sharded gradients (fp32, 4.60 GiB: the whole model at one rank)
// live in the reduce-scatter stream's pool (17 segments).
//
// Compared: the steady step's max_memory_allocated (exact to 0.01 %) and
// max_memory_reserved. Batches 4 and 8 ran after the one before in the
// same process, whose reduce-scatter stream kept its 17 segments
// (4,978,638,848 B reserved, nothing allocated: freed with stream uses
// pending when empty_cache ran): that stale pool is taken out of their
// measured reserve. Outside the allocator the one-rank communicator's first
// collective added 583,008,256 B (used_after_first_collective -
// used_after_context), which memsh does not model for a one-GPU group (it
// counts NCCL's buffers per peer): named, not compared. A one-rank
// all-reduce is a copy (NCCL 2.28.9 enqueue.cc: nRanks == 1), so no buffer
// is connected; what init makes regardless is the candidate: every NCCL
// kernel loaded (ncclInitKernelsForDevice's cudaFuncGetAttributes, under
// lazy module loading; once a process) and three device callocs a channel
// (channel.cc initChannel), each rounded up to the 2 MiB cuMem granularity
// (alloc.h; a communicator's, whatever its size). One figure does not
// split them; tools/oracle/cuda_nccl_comm.py (prepared) does.
//
// Where memsh stands (December 2026): allocated exact; the reduce-scatter
// stream's pool to the byte (4,978,638,848 B both). The reserve is +1.9 %,
// +0.4 %, +0.5 % at batch 2, 4, 8 (issue 28 asks 5 %; asserted within
// 2.5 %), with the steady step replayed after the first one through the
// same allocator, each stream's segments kept in its pool
// (replay/lazy_states.go): AdamW's moments are made in the first step()
// from the compute stream's cache, so the second step's activations need
// segments beside them. Replaying the steady step alone on an empty cache
// it was +1.8 %, -4.7 %, -7.5 %: the measured compute stream kept 2.9 and
// 6.6 GiB more at batch 4 and 8, step 1's segments. memsh keeps a 0.61 GiB
// all-gather stream pool the measured run does not show (its snapshot has
// the default and the reduce-scatter streams only; not identified).
func TestFSDP2OneGPUMeasuredH200(t *testing.T) {
	const stale = 4_978_638_848 // the batch before's reduce-scatter pool
	for _, tc := range []struct {
		batch            int64
		allocated, resvd int64 // measured, steady step
		staleRS          int64
		resTol           float64
	}{
		{2, 29_967_087_616, 35_112_615_936, 0, 0.025},
		{4, 44_511_410_176, 57_841_549_312, stale, 0.025},
		{8, 73_601_103_872, 91_081_408_512, stale, 0.025},
	} {
		p := hfH200Plan(t, "llama-3.2-1b", tc.batch, 2048, "amp") // bf16-mixed, keep_logits
		p.Parallel = core.Parallelism{FSDP: true, FSDPParamDType: units.BF16, FSDPReduceDType: units.FP32}
		r := evalPlan(t, p)
		measuredRes := tc.resvd - tc.staleRS
		da := float64(r.PeakAllocated)/float64(tc.allocated) - 1
		dr := float64(r.PeakReserved)/float64(measuredRes) - 1
		t.Logf("batch %d: allocated memsh %s measured %s (%+.3f %%); reserved memsh %s measured %s (%+.1f %%); streams %v",
			tc.batch, units.FormatBytes(r.PeakAllocated), units.FormatBytes(tc.allocated), 100*da,
			units.FormatBytes(r.PeakReserved), units.FormatBytes(measuredRes), 100*dr, r.Streams)
		if math.Abs(da) > 0.0001 {
			t.Errorf("batch %d: peak allocated %+.3f %% off", tc.batch, 100*da)
		}
		if math.Abs(dr) > tc.resTol {
			t.Errorf("batch %d: peak reserved %+.1f %% off, beyond %.1f %%", tc.batch, 100*dr, 100*tc.resTol)
		}
		// The reduce-scatter stream's pool, measured at every batch
		// (fsdp1.jsonl per_stream, the side stream: 17 segments).
		if rs := streamPeak(r, "reduce_scatter"); rs != stale {
			t.Errorf("batch %d: reduce-scatter stream reserves %d B, measured %d B", tc.batch, rs, int64(stale))
		}
	}
}
