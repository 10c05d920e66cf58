package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// TestSumsAreTimesSums: Sums is Times without its rows, the same bits:
// MbSec and TlSec are the sums of Times' rows in their order, BwdRec
// its backward and recompute rows, on work that exposes every kind of
// term (tensor- and pipeline-parallel transfers, ZeRO-3 gathers with
// NVMe reads and offload copies, DDP's reduction, an optimizer step and
// the step's overhead), and Sums builds no row.
func TestSumsAreTimesSums(t *testing.T) {
	dev := mustDevice(t, "A100-80GB")
	prec, _ := core.LookupPrecision("bf16")
	for _, row := range []struct {
		name string
		par  core.Parallelism
		w    GpuWork
	}{
		{"one GPU", core.Parallelism{}, GpuWork{M: 1, Mb: ComputeTime{Forward: 0.1, Backward: 0.2, Recompute: 0.07}, Optimizer: 0.01, StepOverhead: 0.003}},
		{"tp and pp", core.Parallelism{DP: 2, TP: 2, PP: 2}, GpuWork{M: 4, Mb: ComputeTime{Forward: 0.3, Backward: 0.61, Recompute: 0.29}, Mode: replay.DistDDP, PpSend: 1, PpRecv: 1,
			MbComm: []CommSum{{Kind: "all_reduce", Group: "tp", Bytes: 1 << 24, N: 3}, {Kind: "send", Group: "pp", Bytes: 1 << 22, N: 1}},
			DpComm: []core.CommRecord{{Kind: "all_reduce", Group: "dp", Bytes: 1 << 30, Backward: true}}, Optimizer: 0.02, OptimizerCPU: 0.03}},
		{"zero-3 with nvme reads", core.Parallelism{DP: 8, Zero: 3}, GpuWork{M: 2, Mb: ComputeTime{Forward: 1, Backward: 2}, Mode: replay.DistZeRO, Zero: 3, NVMe: 0.5,
			nvmeParamRead: 3, fsdpDown: 2, fsdpUp: 1, CPUOptimizer: 0.4, host: 0.125,
			DpComm: []core.CommRecord{{Kind: "all_gather", Group: "dp", Bytes: 1 << 28}, {Kind: "reduce_scatter", Group: "dp", Bytes: 1 << 29, Backward: true}}}},
	} {
		plan := &core.Plan{Device: dev, Precision: prec, GradAccum: row.w.M, Cluster: hw.Cluster{Nodes: 1, GPUsPerNode: 8}, Parallel: row.par}
		full, sums := row.w.Times(plan), row.w.Sums(plan)
		var mb, tl, bwd float64
		for _, s := range full.PerMB {
			mb += s.Seconds
			if s.Name == "backward" || s.Name == "recompute" {
				bwd += s.Seconds
			}
		}
		for _, s := range full.Tail {
			tl += s.Seconds
		}
		if len(full.PerMB) != 10 || len(full.Tail) != 6 || mb <= 0 || tl <= 0 {
			t.Errorf("%s: Times has %d and %d rows summing to %g and %g s, want 10 and 6 and positive sums", row.name, len(full.PerMB), len(full.Tail), mb, tl)
		}
		for _, c := range []struct {
			what      string
			got, want float64
		}{
			{"Times' MbSec", full.MbSec, mb}, {"Times' TlSec", full.TlSec, tl}, {"Times' BwdRec", full.BwdRec, bwd},
			{"Sums' MbSec", sums.MbSec, mb}, {"Sums' TlSec", sums.TlSec, tl}, {"Sums' BwdRec", sums.BwdRec, bwd},
		} {
			if math.Float64bits(c.got) != math.Float64bits(c.want) {
				t.Errorf("%s: %s %.17g, its rows sum to %.17g", row.name, c.what, c.got, c.want)
			}
		}
		if sums.PerMB != nil || sums.Tail != nil {
			t.Errorf("%s: Sums built rows: %v %v", row.name, sums.PerMB, sums.Tail)
		}
	}
}
