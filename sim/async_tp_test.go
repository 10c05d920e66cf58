package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// asyncTPPlan is a two-layer Llama (dim 1024, FFN 2048) on tp=2 with
// DTensor's sequence-parallel TP, each block compiled.
func asyncTPPlan(dev string, phase core.Phase, float8, async bool) *core.Plan {
	m := testmodels.Llama(1024, 2, 8, 8, 2048, 32000, "sdpa")
	p := testmodels.LlamaPlan(m, 2, 2048, "bf16-mixed", "full", dev)
	p.Phase = phase
	p.Parallel = core.Parallelism{TP: 2, SequenceParallel: true, TPRuntime: "torch", AsyncTP: async}
	p.Compile = core.Compile{Blocks: true}
	if float8 {
		p.Float8 = core.Float8{Scaling: "tensorwise"}
	}
	return p
}

// TestAsyncTPByHand counts what parallel(async_tp=True) adds (core/
// async_tp.go, replay/async_tp.go), against the same plan without it.
//
// The backend stream holds a cuBLAS workspace per thread that runs a fused
// op there (the forward's; in training the autograd engine's too) and,
// under float8 (torch._scaled_mm), a 1 MiB cuBLASLt one per thread, in
// segments of its own:
//
//   - H100 (32 MiB workspaces): each a request of 10 MiB or more, rounded
//     up to 2 MiB, a 32 MiB segment of its own; two in training, 64 MiB.
//   - A100 (:4096:2:16:8, 8 MiB + 128 KiB = 8,519,680 B): a request
//     between 1 and 10 MiB takes a 20 MiB segment (kLargeBuffer), and the
//     second workspace fits in what the first left: 20 MiB reserved,
//     17,039,360 B allocated.
//   - float8's cuBLASLt workspaces, 1 MiB each, are small-pool requests:
//     one 2 MiB segment holds both.
//
// The symmetric-memory workspace, outside the allocator, is the largest
// request: the reduce-scatter of a row-parallel output, two chunks of [2,
// 2048/2, 1024] bf16 (4 MiB each), 8 MiB; the all-gathers' shards are
// [2, 1024, 1024], 4 MiB in bf16, 2 MiB in fp8.
func TestAsyncTPByHand(t *testing.T) {
	const mib = 1 << 20
	a100ws := int64(8<<20 + 128<<10)
	for _, c := range []struct {
		name              string
		dev               string
		phase             core.Phase
		float8            bool
		reserved, alloced int64
	}{
		{"H100 training", "H100-80GB", core.Train, false, 64 * mib, 64 * mib},
		{"H100 evaluation", "H100-80GB", core.Eval, false, 32 * mib, 32 * mib},
		{"A100 training", "A100-80GB", core.Train, false, 20 * mib, 2 * a100ws},
		{"H100 training, float8", "H100-80GB", core.Train, true, 64*mib + 2*mib, 64*mib + 2*mib},
	} {
		t.Run(c.name, func(t *testing.T) {
			off := evalPlan(t, asyncTPPlan(c.dev, c.phase, c.float8, false))
			on := evalPlan(t, asyncTPPlan(c.dev, c.phase, c.float8, true))
			if d := on.PeakReserved - off.PeakReserved; d != c.reserved {
				t.Errorf("peak reserved grew by %d B, want %d", d, c.reserved)
			}
			if d := on.PeakAllocated - off.PeakAllocated; d != c.alloced {
				t.Errorf("peak allocated grew by %d B, want %d", d, c.alloced)
			}
			var symm int64
			for _, o := range on.Overheads {
				if o.Name == "symm_mem_tp" {
					symm = o.Bytes
				}
			}
			if symm != 8*mib {
				t.Errorf("symm_mem_tp %d B, want %d", symm, 8*mib)
			}
			if d := on.DeviceUsed - off.DeviceUsed; d != c.reserved+8*mib {
				t.Errorf("device used grew by %d B, want %d (the reserve and the workspace)", d, c.reserved+8*mib)
			}
			for _, o := range off.Overheads {
				if o.Name == "symm_mem_tp" {
					t.Errorf("symm_mem_tp without async TP")
				}
			}
			var stream int64 = -1
			for _, s := range on.Streams {
				if s.Name == replay.StreamName(replay.StreamAsyncTP) {
					stream = s.Bytes
				}
			}
			if stream != c.reserved {
				t.Errorf("async_tp stream reserved %d B, want %d", stream, c.reserved)
			}
		})
	}
}

// TestAsyncTPErrors: the plans async TP does not apply to are errors
// that say what it needs.
func TestAsyncTPErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"no tp", func(p *core.Plan) { p.Parallel.TP = 1 }, "needs tp > 1"},
		{"megatron's tp", func(p *core.Plan) { p.Parallel.TPRuntime = "megatron" }, "over DTensor's collectives"},
		{"no sequence parallelism", func(p *core.Plan) { p.Parallel.SequenceParallel = false }, "needs sequence_parallel=True"},
		{"eager", func(p *core.Plan) { p.Compile = core.Compile{} }, "acts only in compiled blocks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := asyncTPPlan("H100-80GB", core.Train, false, true)
			c.edit(p)
			_, err := Evaluate(p, core.Options{})
			var ue *units.Error
			if !errors.As(err, &ue) || !strings.Contains(ue.Msg, c.want) || ue.Hint == "" || ue.Path != "parallel" {
				t.Fatalf("err = %v, want parallel's, with a hint, saying %q", err, c.want)
			}
		})
	}
}
