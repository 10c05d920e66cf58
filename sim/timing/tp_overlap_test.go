package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// tpLayerProgram is one sequence-parallel attention input as the lowering
// records it (core/tp.go): the all-gather of the layer input (op 0), read
// by two column-parallel matmuls (ops 1 and 2, q and k); the gather's
// backward reduce-scatter of the input gradient runs beside both wgrad
// GEMMs, each matmul's re-gather of its saved input beside its own dgrad
// GEMM.
func tpLayerProgram() *core.Program {
	return &core.Program{
		Values: []core.ValueInfo{{Producer: -1}, {Producer: 0}, {Producer: 1}, {Producer: 2}},
		Ops: []core.OpInfo{
			{Kind: "all_gather", In: []core.Value{0}, Out: []core.Value{1}},
			{Kind: "matmul", In: []core.Value{1}, Out: []core.Value{2}},
			{Kind: "matmul", In: []core.Value{1}, Out: []core.Value{3}},
		},
		Comm: []core.CommRecord{
			{Kind: "all_gather", Group: "tp", Bytes: 64 << 20},
			{Kind: "reduce_scatter", Group: "tp", Bytes: 64 << 20, Backward: true, Beside: 1},
			{Kind: "all_gather", Group: "tp", Bytes: 64 << 20, Backward: true, Beside: 2, Dgrad: true},
			{Kind: "all_gather", Group: "tp", Bytes: 64 << 20, Backward: true, Beside: 3, Dgrad: true},
		},
	}
}

// TestTPOverlapBeside counts the GEMM time each backward collective runs
// beside, from the ops' priced dgrad and wgrad GEMMs (given here):
//
//	q: dgrad 2.0 ms, wgrad 3.0 ms;  k: dgrad 1.0 ms, wgrad 1.5 ms
//	reduce-scatter (beside both wgrads)  3.0 + 1.5 = 4.5 ms
//	q's re-gather (beside q's dgrad)                 2.0 ms
//	k's re-gather (beside k's dgrad)                 1.0 ms
//
// Only Megatron's path overlaps: a release before the asynchronous
// backward (async_tp_comm=False) and a plan of another precision hide
// nothing; the forward's gather is never hidden.
func TestTPOverlapBeside(t *testing.T) {
	prog := tpLayerProgram()
	costs := []OpCost{{}, {Dgrad: 2e-3, Wgrad: 3e-3}, {Dgrad: 1e-3, Wgrad: 1.5e-3}}
	megatron, _ := core.LookupPrecision("megatron")
	bf16, _ := core.LookupPrecision("bf16")
	for _, row := range []struct {
		name string
		prec core.Precision
		sync bool
		want map[string]float64 // hidden ms by kind/direction
	}{
		{"megatron", megatron, false, map[string]float64{"all_gather/fwd": 0, "reduce_scatter": 4.5, "all_gather/bwd 2": 2, "all_gather/bwd 1": 1}},
		{"megatron, async_tp_comm=False", megatron, true, map[string]float64{"all_gather/fwd": 0, "reduce_scatter": 0, "all_gather/bwd": 0}},
		{"bf16", bf16, false, map[string]float64{"all_gather/fwd": 0, "reduce_scatter": 0, "all_gather/bwd": 0}},
	} {
		plan := &core.Plan{Precision: row.prec, Parallel: core.Parallelism{TP: 2, SequenceParallel: true, SyncTPComm: row.sync}}
		got := map[string]float64{}
		for _, s := range SumCommOf(prog, plan, costs) {
			key := s.Kind
			switch {
			case s.Kind == "all_gather" && !s.Backward:
				key += "/fwd"
			case s.Kind == "all_gather" && s.Hide > 0:
				key += "/bwd " + map[bool]string{true: "2", false: "1"}[s.Hide > 1.5e-3]
			case s.Kind == "all_gather":
				key += "/bwd"
			}
			got[key] += 1e3 * s.Hide
		}
		for k, w := range row.want {
			if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
				t.Errorf("%s: %s hides %.3f ms (present %v), hand count %.3f ms", row.name, k, g, ok, w)
			}
		}
		if len(got) != len(row.want) {
			t.Errorf("%s: sums %v, want the keys of %v", row.name, got, row.want)
		}
	}
}

// TestTPOverlapExposed counts by hand what one layer's backward exposes
// of a reduce-scatter of the input gradient: [4096, 8192] bf16 (64 MiB)
// over tp 8 inside an A100 node (NVLink3 300 GB/s a direction at 68 %:
// a 204 GB/s bus), B x 7/8 / 204 GB/s = 0.2879 ms plus the Simple
// protocol's ring latency, 8.4 µs + 7 hops x 3.4 µs = 32.2 µs (nccl.go):
// 0.3201 ms, twice per micro-batch (the attention's and the MLP's
// input). Beside a GEMM of 0.2 ms it exposes 0.1201 ms, beside 0.5 ms
// nothing: exposed = max(0, collective - GEMM).
func TestTPOverlapExposed(t *testing.T) {
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	dev.LinkGBps = 300
	prec, _ := core.LookupPrecision("megatron")
	plan := &core.Plan{Device: dev, Precision: prec, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
		Parallel: core.Parallelism{TP: 8, SequenceParallel: true}}
	for _, row := range []struct {
		name          string
		hideMs        float64
		wantMs, tolMs float64
	}{
		{"exposed whole", 0, 2 * 0.3201, 0.001},
		{"beside 0.2 ms", 0.2, 2 * 0.1201, 0.001},
		{"beside 0.5 ms", 0.5, 0, 1e-12},
	} {
		w := &GpuWork{M: 1, Mb: ComputeTime{Forward: 1, Backward: 2},
			MbComm: []CommSum{{Kind: "reduce_scatter", Group: "tp", Bytes: 64 << 20, Backward: true, N: 2, Hide: row.hideMs / 1e3}}}
		var got float64
		for _, s := range w.exposedComm(plan).perMB {
			if s.Name == "tp_comm" {
				got = 1e3 * s.Seconds
			}
		}
		if math.Abs(got-row.wantMs) > row.tolMs {
			t.Errorf("%s: tp_comm %.4f ms, hand count %.4f ms", row.name, got, row.wantMs)
		}
	}
}

// TestTPCommOverlapBeside counts the GEMM time each userbuffers
// collective (parallel(tp_comm_overlap=True)) runs beside, on one
// sequence-parallel attention: the forward all-gather (op 0) read by q
// and k (ops 1, 2), o (op 3, row-parallel, reading q's output) followed by
// its reduce-scatter; priced GEMMs (given here):
//
//	q: fwd 1.0 ms, dgrad 2.0, wgrad 3.0;  k: fwd 0.5, dgrad 1.0, wgrad 1.5
//	o: fwd 0.8, dgrad 1.6, wgrad 1.7
//	forward all-gather (beside q's and k's forward)   1.0 + 0.5 = 1.5 ms
//	forward reduce-scatter (beside o's forward)                   0.8 ms
//	backward all-gather of o's output gradient (o's dgrad)        1.6 ms
//	backward reduce-scatter (async, q's and k's wgrad)  3.0 + 1.5 = 4.5 ms
//
// Without tp_comm_overlap only the asynchronous one hides; with it and
// async_tp_comm=False only the userbuffers ones; without sequence
// parallelism or under another precision userbuffers hide nothing.
func TestTPCommOverlapBeside(t *testing.T) {
	prog := &core.Program{
		Values: []core.ValueInfo{{Producer: -1}, {Producer: 0}, {Producer: 1}, {Producer: 2}, {Producer: 3}},
		Ops: []core.OpInfo{
			{Kind: "all_gather", In: []core.Value{0}, Out: []core.Value{1}},
			{Kind: "matmul", In: []core.Value{1}, Out: []core.Value{2}},
			{Kind: "matmul", In: []core.Value{1}, Out: []core.Value{3}},
			{Kind: "matmul", In: []core.Value{2}, Out: []core.Value{4}},
		},
		Comm: []core.CommRecord{
			{Kind: "all_gather", Group: "tp", Bytes: 1 << 20, Beside: 1, UB: true, Fprop: true},
			{Kind: "reduce_scatter", Group: "tp", Bytes: 2 << 20, Beside: 4, UB: true, Fprop: true},
			{Kind: "all_gather", Group: "tp", Bytes: 3 << 20, Backward: true, Beside: 4, Dgrad: true, UB: true},
			{Kind: "reduce_scatter", Group: "tp", Bytes: 4 << 20, Backward: true, Beside: 1},
		},
	}
	costs := []OpCost{{}, {Fwd: 1e-3, Dgrad: 2e-3, Wgrad: 3e-3}, {Fwd: 0.5e-3, Dgrad: 1e-3, Wgrad: 1.5e-3}, {Fwd: 0.8e-3, Dgrad: 1.6e-3, Wgrad: 1.7e-3}}
	megatron, _ := core.LookupPrecision("megatron")
	bf16, _ := core.LookupPrecision("bf16")
	for _, row := range []struct {
		name           string
		prec           core.Precision
		sp, ub, sync   bool
		ag, rs, bag, b float64 // hidden ms: forward all-gather, forward reduce-scatter, backward all-gather, backward reduce-scatter
	}{
		{"tp_comm_overlap", megatron, true, true, false, 1.5, 0.8, 1.6, 4.5},
		{"async only", megatron, true, false, false, 0, 0, 0, 4.5},
		{"tp_comm_overlap, async_tp_comm=False", megatron, true, true, true, 1.5, 0.8, 1.6, 0},
		{"tp_comm_overlap without SP", megatron, false, true, false, 0, 0, 0, 4.5},
		{"bf16", bf16, true, true, false, 0, 0, 0, 0},
	} {
		plan := &core.Plan{Precision: row.prec, Parallel: core.Parallelism{TP: 2, SequenceParallel: row.sp, TPCommOverlap: row.ub, SyncTPComm: row.sync}}
		got := map[int64]float64{}
		for _, s := range SumCommOf(prog, plan, costs) {
			got[s.Bytes>>20] = 1e3 * s.Hide
		}
		for mib, want := range map[int64]float64{1: row.ag, 2: row.rs, 3: row.bag, 4: row.b} {
			if math.Abs(got[mib]-want) > 1e-9 {
				t.Errorf("%s: the %d MiB collective hides %.3f ms, hand count %.3f ms", row.name, mib, got[mib], want)
			}
		}
	}
}
