package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// ProcessGroupNCCL's record_stream on Megatron's all-to-alls (replay/
// nccl_record.go, core.Runtime.NCCLRecordStreams): one MoE block of
// Megatron's grouped experts, 1,024 tokens of dim 1,024, 4 experts, top-2,
// bf16, ep 2 (dp 2), Megatron-Core 0.12's path (unpermute_probs: no probs
// all-to-all), no recompute, one micro-batch. Each all-to-all, dispatch
// and combine, moves this rank's 1,024 x 2 = 2,048 routed rows: 2,048 x
// 1,024 x 2 bytes = 4 MiB in and 4 MiB out, and its backward the two
// gradients of those: 8 tensors of 4 MiB recorded on the NCCL stream.
// The only host waits are the dispatcher's sync, before the first
// all-to-all, and the optimizer step, by which every one of them has been
// freed: 32 MiB held at once under torch 2.6 ("cuda-2.6"), none on a
// runtime that stashes instead ("cuda") or with TORCH_NCCL_AVOID_RECORD_
// STREAMS=1 (train(nccl_avoid_record_streams=True)), none without expert
// parallelism (no all-to-all), and none for grouped experts that are not
// Megatron's (precision "bf16": not its all_to_all_single).
func TestNCCLRecordStreamHold(t *testing.T) {
	for _, tc := range []struct {
		name, runtime, prec string
		ep                  int64
		want                int64
	}{
		{"Megatron, torch 2.6", "cuda-2.6", "megatron", 2, 32 << 20},
		{"Megatron, torch 2.11 (stashing)", "cuda", "megatron", 2, 0},
		{"Megatron, torch 2.6, TORCH_NCCL_AVOID_RECORD_STREAMS=1", "cuda-2.6+avoid", "megatron", 2, 0},
		{"Megatron, torch 2.6, no ep", "cuda-2.6", "megatron", 1, 0},
		{"grouped experts, not Megatron's", "cuda-2.6", "bf16", 2, 0},
	} {
		m := &nn.MoE{Dim: 1024, Hidden: 512, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped}
		p := moeBlockPlan(t, m, 1024, tc.prec)
		rt, avoid := strings.CutSuffix(tc.runtime, "+avoid")
		p.Runtime, _ = core.LookupRuntime(rt)
		p.RuntimeMemory.NCCLAvoidRecordStreams = avoid
		p.Parallel = core.Parallelism{DP: 2, EP: tc.ep, ETP: 1, UnpermuteProbs: tc.prec == "megatron"}
		if tc.ep == 1 {
			p.Parallel = core.Parallelism{DP: 2}
		}
		r := evalPlan(t, p)
		if r.NCCLHeld != tc.want {
			t.Errorf("%s: %d bytes held for the NCCL stream at once, want %d", tc.name, r.NCCLHeld, tc.want)
		}
	}
}

// How long the hold lasts (replay/nccl_record.go): two such MoE blocks,
// one micro-batch. With 2 local experts sort_chunks copies the received
// rows into local-expert order, so a layer's forward frees the permuted
// rows, the received rows and the experts' outputs after their
// all-to-alls (3 x 4 MiB), and its backward the combined rows the
// unpermute kept and the four gradients (5 x 4 MiB). Under full recompute
// every layer's backward starts with its recompute's dispatcher sync, so
// what one layer's recompute and backward free waits at most one layer:
// 12 + 20 = 32 MiB, as for one block. Without recompute the backward
// makes no sync: the second layer's forward frees 12 MiB after the last
// sync and both layers' backwards 20 MiB each before the optimizer step:
// 52 MiB.
func TestNCCLRecordStreamHoldSpan(t *testing.T) {
	for _, tc := range []struct {
		recompute string
		want      int64
	}{{"full", 32 << 20}, {"none", 52 << 20}} {
		m := &nn.MoE{Dim: 1024, Hidden: 512, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoEGrouped}
		p := moeBlockPlan(t, m, 1024, "megatron")
		p.Model.Layers = []core.Layer{&core.Repeat{Name: "layers", Layer: &core.Residual{Layer: m}, N: 2}}
		p.Runtime, _ = core.LookupRuntime("cuda-2.6")
		p.Parallel = core.Parallelism{DP: 2, EP: 2, ETP: 1, UnpermuteProbs: true}
		ck, err := core.ParseCheckpoint(tc.recompute)
		if err != nil {
			t.Fatal(err)
		}
		p.Checkpoint = ck
		if r := evalPlan(t, p); r.NCCLHeld != tc.want {
			t.Errorf("recompute %s: %d bytes held for the NCCL stream at once, want %d", tc.recompute, r.NCCLHeld, tc.want)
		}
	}
}
