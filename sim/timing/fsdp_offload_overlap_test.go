package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestFSDPOffloadCopiesOverlap counts by hand what FSDP's CPU offload
// copies expose (exposedComm): they join the chain of the collectives on
// the side streams, the copies down split between the forward's and the
// backward's gathers, the copies up behind the reduce-scatters. No
// collective here (dp 2 gathers of 0 bytes are left out: gatherMB = rsMB
// = 0), a 1 s forward and a 2 s backward per micro-batch:
//
//   - 1 s down, 0.5 s up: 0.5 s beside the forward, 0.5 + 0.5 s beside
//     the backward: all hidden;
//   - 4 s down, 0 up: 2 s beside a 1 s forward (1 s out), 2 s beside a
//     2 s backward: 1 s exposed;
//   - 4 micro-batches, 8 s down and 2 s up per step: per micro-batch
//     2 s and 0.5 s: hidden;
//   - evaluation, 1.5 s down: all beside the 1 s forward: 0.5 s.
func TestFSDPOffloadCopiesOverlap(t *testing.T) {
	dev := mustDevice(t, "A100-80GB")
	prec, _ := core.LookupPrecision("bf16")
	for _, row := range []struct {
		name     string
		m        int64
		eval     bool
		down, up float64
		want     float64
	}{
		{"hidden", 1, false, 1, 0.5, 0},
		{"the forward's half outlasts it", 1, false, 4, 0, 1},
		{"4 micro-batches, hidden", 4, false, 8, 2, 0},
		{"evaluation", 1, true, 1.5, 0, 0.5},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: row.m, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
			Parallel: core.Parallelism{DP: 2, FSDP: true}}
		w := &GpuWork{M: row.m, Mb: ComputeTime{Forward: 1, Backward: 2}, Mode: replay.DistFSDP, Eval: row.eval, fsdpDown: row.down, fsdpUp: row.up}
		c := w.exposedComm(plan)
		if math.Abs(c.fsdpCopies-row.want) > 1e-12 {
			t.Errorf("%s: offload copies exposed %.4f s, hand count %.4f s", row.name, c.fsdpCopies, row.want)
		}
		if g := w.Times(plan); shareOf(g.Tail, "offload") != c.fsdpCopies {
			t.Errorf("%s: the offload share %.4f s, want the exposed copies %.4f s", row.name, shareOf(g.Tail, "offload"), c.fsdpCopies)
		}
	}
}

// shareOf is the seconds of the named share, 0 without one.
func shareOf(list []replay.TimeShare, name string) float64 {
	for _, s := range list {
		if s.Name == name {
			return s.Seconds
		}
	}
	return 0
}

// TestFSDP1NoSyncReducesOnce counts by hand where FSDP1 under no_sync()
// (grad_accum > 1) puts its reduce-scatters and offloaded gradient
// copies: behind the synchronising micro-batch's backward alone, where
// FSDP2 reduces every micro-batch (the overlap's exposure is convex, so
// spreading the one reduction over the micro-batches hides what it does
// not). A 1 s forward and a 2 s backward per micro-batch, no gathers, 4
// micro-batches; rs is the step's reduce-scatter record priced whole (a
// message sized to take rs seconds on the dp group):
//
//   - FSDP1, rs = 3 s, 2 s up: the synchronising backward carries 3 + 2 s
//     beside its 2 s: 1 s of fsdp_comm (3 - 2), 2 s of offload;
//     fsdp_comm per micro-batch 1/4 s;
//   - FSDP1, rs = 1 s, 0.5 s up: 1.5 s beside 2 s: hidden;
//   - FSDP2, rs = 3 s over 4 micro-batches, 2 s up: 0.75 + 0.5 s beside
//     each 2 s backward: hidden.
func TestFSDP1NoSyncReducesOnce(t *testing.T) {
	dev := mustDevice(t, "A100-80GB")
	prec, _ := core.LookupPrecision("bf16")
	for _, row := range []struct {
		name           string
		version        int
		rs, up         float64
		wantMB, wantUp float64 // fsdp_comm per micro-batch, offload per step
	}{
		{"FSDP1, the sync backward outlasted", 1, 3, 2, 0.25, 2},
		{"FSDP1, hidden", 1, 1, 0.5, 0, 0},
		{"FSDP2, spread", 2, 3, 2, 0, 0},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: 4, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
			Parallel: core.Parallelism{DP: 2, FSDP: true, FSDPVersion: row.version}}
		bytes := bytesFor(plan, "reduce_scatter", row.rs) // rs seconds at the group's rate
		rs := collectiveSeconds(plan, "reduce_scatter", "dp", bytes)
		w := &GpuWork{M: 4, Mb: ComputeTime{Forward: 1, Backward: 2}, Mode: replay.DistFSDP, fsdpUp: row.up,
			DpComm: []core.CommRecord{{Kind: "reduce_scatter", Group: "dp", Bytes: bytes, Backward: true}}}
		c := w.exposedComm(plan)
		wantMB := row.wantMB
		if wantMB > 0 {
			wantMB = (rs - 2) / 4 // rs is within a byte's time of row.rs
		}
		if got := shareOf(c.perMB[:], "fsdp_comm"); math.Abs(got-wantMB) > 1e-9 {
			t.Errorf("%s: fsdp_comm %.6f s per micro-batch, hand count %.6f s", row.name, got, wantMB)
		}
		if math.Abs(c.fsdpCopies-row.wantUp) > 1e-9 {
			t.Errorf("%s: offload copies exposed %.6f s, hand count %.6f s", row.name, c.fsdpCopies, row.wantUp)
		}
	}
}

// TestNVMeParamReadsInChain counts by hand where ZeRO-Infinity's
// parameter reads from NVMe go: prefetched before their gathers, they
// head the chain of the gathers and their PCIe copies (half beside the
// forward, half beside the backward), and what the reads add to that
// chain's exposure is nvme; the serial NVMe time (w.NVMe) adds whole. No
// collective, a 1 s forward and a 2 s backward, one micro-batch, 0.5 s of
// serial NVMe:
//
//   - reads 1 s, copies 1 s: 1 s beside the forward, 1 s beside the
//     backward: hidden, nvme 0.5 s;
//   - reads 4 s, no copies: 2 s beside a 1 s forward: 1 s exposed, nvme
//     1.5 s;
//   - reads 2 s, copies 2 s: the copies alone hide (1 s beside each), with
//     the reads the forward's 2 s outlast it by 1 s: nvme 1.5 s, offload 0.
func TestNVMeParamReadsInChain(t *testing.T) {
	dev := mustDevice(t, "A100-80GB")
	prec, _ := core.LookupPrecision("bf16")
	plan := &core.Plan{Device: dev, Precision: prec, GradAccum: 1, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8},
		Parallel: core.Parallelism{DP: 8, Zero: 3}}
	for _, row := range []struct {
		name          string
		reads, copies float64
		nvme, offload float64
	}{
		{"hidden", 1, 1, 0.5, 0},
		{"the forward's half outlasts it", 4, 0, 1.5, 0},
		{"the reads tip it", 2, 2, 1.5, 0},
	} {
		w := &GpuWork{M: 1, Mb: ComputeTime{Forward: 1, Backward: 2}, Mode: replay.DistZeRO, Zero: 3, NVMe: 0.5,
			nvmeParamRead: row.reads, fsdpDown: row.copies}
		g := w.Times(plan)
		if got := shareOf(g.Tail, "nvme"); math.Abs(got-row.nvme) > 1e-12 {
			t.Errorf("%s: nvme %.4f s, hand count %.4f s", row.name, got, row.nvme)
		}
		if got := shareOf(g.Tail, "offload"); math.Abs(got-row.offload) > 1e-12 {
			t.Errorf("%s: offload %.4f s, hand count %.4f s", row.name, got, row.offload)
		}
	}
}
