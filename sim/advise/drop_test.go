package advise

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// llama13B is a Llama-2-13B plan with offload o over one node of 8
// A100-80GB: batch 4 x seq 4096, bf16 autocast, full checkpointing.
func llama13B(par core.Parallelism, o core.Offload, host int64) *core.Plan {
	p := testmodels.LlamaPlan(testmodels.Llama(5120, 40, 40, 40, 13824, 32000, "flash"), 4, 4096, "bf16-mixed", "full", "A100-80GB")
	p.Parallel, p.Offload, p.HostMemory = par, &o, host
	p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 8}
	return p
}

// TestAdviceTakesOffloadBack: a 13B whose offload the GPU can hold. With
// 128 GB of host RAM per node each plan falls short of host memory, and
// every change that keeps the offload does too; taking the offload back
// (offload=None) fits the GPU and passes the check, and runs faster (no
// CPU optimizer step, no PCIe copies). Without host_memory the plan fits
// as it is, and goal Fit lists the same change, faster. Each row is
// checked against a replay of its plan (checkRows: its plan passes the
// host check, or its replay fails), the best offload row against the
// plan replayed without offload, and the count of candidates short of
// host memory against the rows.
func TestAdviceTakesOffloadBack(t *testing.T) {
	zero3 := core.Parallelism{DP: 8, Zero: 3}
	for _, c := range []struct {
		name string
		par  core.Parallelism
		off  core.Offload
	}{
		{"zero3, the optimizer on the CPU", zero3, core.Offload{Optimizer: "cpu"}},
		{"zero3, parameters and optimizer on the CPU", zero3, core.Offload{Optimizer: "cpu", Params: "cpu"}},
		{"zero3, the optimizer on NVMe", zero3, core.Offload{Optimizer: "nvme"}},
		{"fsdp1 CPUOffload", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, core.Offload{Params: "cpu"}},
		{"fsdp2 CPUOffloadPolicy", core.Parallelism{DP: 8, FSDP: true}, core.Offload{Params: "cpu"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bare := llama13B(c.par, core.Offload{}, 0)
			bare.Offload = nil
			want, err := sim.Evaluate(bare, core.Options{})
			if err != nil || !want.Fits {
				t.Fatalf("without offload: %v, fits %v", err, want != nil && want.Fits)
			}
			for _, host := range []int64{128e9, 0} {
				p := llama13B(c.par, c.off, host)
				res := run(t, p, Options{MaxChanges: 1})
				if (res.Host != "") != (host > 0) || res.Fits != (host == 0) {
					t.Fatalf("host_memory %d: plan short of host memory %q, fits %v", host, res.Host, res.Fits)
				}
				checkRows(t, res)
				var best *Row
				for i, r := range res.Rows {
					if r.HostShort != "" {
						t.Errorf("row %s is short of host memory: %s", changes(r), r.HostShort)
					}
					if best == nil && r.Changes[0].Knob == "offload" {
						best = &res.Rows[i]
					}
				}
				if best == nil || changes(*best) != "offload=None" || !best.Fits {
					t.Fatalf("host_memory %d: best offload row %v, want offload=None fitting (rows %d)", host, best, len(res.Rows))
				}
				if best.Used != want.DeviceUsed || best.StepSeconds() != want.Time.StepSeconds || best.TimeChange >= 0 {
					t.Errorf("host_memory %d: offload=None uses %d, %g s (%+.3f); the plan without offload %d, %g s", host, best.Used, best.StepSeconds(), best.TimeChange, want.DeviceUsed, want.Time.StepSeconds)
				}
				if host == 0 {
					if res.Stats.HostShort != 0 || len(res.Rows) != 1 {
						t.Errorf("fits as it is: %d rows, %d short of host memory, want the one drop", len(res.Rows), res.Stats.HostShort)
					}
					continue
				}
				// Every other knob keeps the offload: short of host memory.
				if s := res.Stats; s.HostShort == 0 || s.HostShort >= s.Singles {
					t.Errorf("%d singles replayed, %d short of host memory", s.Singles, s.HostShort)
				}
			}
		})
	}
}

// TestHostShortPairs: short of host memory, a change that keeps the
// offload fails the host check alone but pairs with the offload taken
// back: compile, a smaller micro-batch or expandable segments with
// offload=None fit, and a pair is kept only when it beats offload=None
// alone (rank). Two changes short of host memory are never paired.
func TestHostShortPairs(t *testing.T) {
	p := llama13B(core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "cpu"}, 128e9)
	res := run(t, p, Options{})
	checkRows(t, res)
	var alone *Row
	for i, r := range res.Rows {
		if changes(r) == "offload=None" {
			alone = &res.Rows[i]
		}
	}
	if alone == nil {
		t.Fatal("offload=None is not a row")
	}
	pairs := 0
	for _, r := range res.Rows {
		if len(r.Changes) != 2 {
			continue
		}
		pairs++
		other := r.Changes[0]
		if other.String() == "offload=None" {
			other = r.Changes[1]
		} else if r.Changes[1].String() != "offload=None" {
			t.Errorf("pair %s does not take the offload back", changes(r))
			continue
		}
		q, err := other.Apply(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Evaluate(q, core.Options{}); err == nil {
			t.Errorf("%s alone passes the host check", other)
		}
		if r.StepSeconds() >= alone.StepSeconds() && r.Used >= alone.Used {
			t.Errorf("pair %s (%g s, %d B) does not beat offload=None alone (%g s, %d B)", changes(r), r.StepSeconds(), r.Used, alone.StepSeconds(), alone.Used)
		}
	}
	if pairs == 0 {
		t.Error("no pair with the offload taken back")
	}
}
