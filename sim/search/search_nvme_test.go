package search

import (
	"context"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// The same with ZeRO-Infinity in the space (offload=["none", "params",
// "nvme"]): the bound of an NVMe layout (no model state on the GPU, its
// compute alone for the time) stays below its replay, the walk orders it
// by its replay's time, nothing that fits is pruned, and the search's
// rows and front are brute force's, without host_memory and with one
// that every NVMe layout fails (on a model this small their swap buffers
// hold the whole partition), and some others, as their replays say.
func TestSearchNVMeOffloadEqualsBruteForce(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 9<<29) // 4.5 GiB: small enough that both bounds prune, large enough that faster layouts dominate some
	space := Space{GPUs: 8, GlobalBatch: 16, TP: []int64{1, 2}, PP: []int64{1}, CP: []int64{1},
		MicroBatch: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero3"}, Offload: []string{"none", "nvme"},
		Top: 6, Workers: 2}
	for _, host := range []int64{0, hostBetween(t, base, space)} {
		base.HostMemory = host
		if host > 0 { // the parameters on the host: the NVMe layouts' memory on the GPU, and less host
			space.Offload = []string{"none", "optimizer", "params", "nvme"}
		}
		res := checkBruteForce(t, base, space, false)
		nvme := 0
		for _, r := range res.Front {
			if o := r.Plan.Offload; o != nil && o.Optimizer == "nvme" {
				if o.Params != "cpu" || r.Sharding != "zero3" {
					t.Errorf("%s: offload %+v on %s", r.Plan.Parallel, *o, r.Sharding)
				}
				nvme++
			}
		}
		switch {
		case host == 0 && nvme == 0:
			t.Errorf("no NVMe layout on the front")
		case host > 0 && (nvme > 0 || res.Stats.HostShort == 0):
			t.Errorf("host_memory %d: %d NVMe layouts on the front, %d layouts failed the host check (want 0, some)", host, nvme, res.Stats.HostShort)
		}
		t.Logf("host_memory %d: %+v, %d NVMe layouts on the front of %d", host, res.Stats, nvme, len(res.Front))
	}
}

// hostBetween is a host_memory per node between the need of the
// layouts with their parameters on the host and the optimizer on NVMe
// (more, by their swap buffers of the whole partition: this model's
// partitions are below one sub-group) and that of those with both on
// the host (less), from replays of dp=8 at zero3.
func hostBetween(t *testing.T, base *core.Plan, space Space) int64 {
	t.Helper()
	need := func(o *core.Offload) int64 {
		p := *base
		p.Parallel = core.Parallelism{DP: space.GPUs, Zero: 3}
		p.GradAccum = space.GlobalBatch / space.GPUs
		p.Offload = o
		r, err := sim.Evaluate(&p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := replay.HostNeed(&p, r.HostMemory)
		return n
	}
	cpu, nvme := need(&core.Offload{Optimizer: "cpu", Params: "cpu"}), need(&core.Offload{Optimizer: "nvme", Params: "cpu"})
	if nvme <= cpu {
		t.Fatalf("NVMe layout needs %d B of host per node, CPU one %d B", nvme, cpu)
	}
	return (cpu + nvme) / 2
}

// A model whose optimizer state does not fit the node's host memory
// finds its layouts with ZeRO-Infinity, and only there (hand count).
// Llama-2-7B (6,738,415,616 parameters) on 2 x A100-40GB, one node,
// host_memory=100 GB: at zero3 each GPU's partition is P = 3,369,207,808
// elements. With the optimizer on the host, a GPU pins its fp32 master
// and Adam moments and its fp32 gradient partition, 16 B per element, at
// least 53.9 GB, 107.8 GB per node: every ZeRO-Offload layout (zero2 or
// zero3, parameters on the host or not) fails the check. On the GPU, the
// 16-bit weights, gradients and the states, 18 B per element over two
// GPUs (60.6 GB), do not fit 40 GB. With the optimizer on NVMe
// (ZeRO-Infinity), the host keeps the 16-bit partition and the 16-bit
// gradient buffer, 4 B per element (13.5 GB), and 4 pinned fp32 swap
// buffers of one 1e9-element sub-group (16 GB, replay/offload_nvme.go):
// about 29.5 GB per GPU, 59 GB per node.
func TestSearchNVMeFitsShortHost(t *testing.T) {
	m := testmodels.Llama(4096, 32, 32, 32, 11008, 32000, "flash")
	base := testmodels.LlamaPlan(m, 1, 4096, "bf16-mixed", "full", "A100-40GB")
	base.HostMemory = 100_000_000_000
	base.Cluster.Nodes, base.Cluster.GPUsPerNode = 1, 2
	base.Parallel = core.Parallelism{DP: 2}
	const p = 3_369_207_808 // the partition of 6,738,415,616 parameters on 2 GPUs
	space := Space{GPUs: 2, GPUsPerNode: 2, GlobalBatch: 2, TP: []int64{1, 2}, PP: []int64{1}, CP: []int64{1},
		Sharding: []string{"zero2", "zero3"}, Checkpoint: []string{"full"}, Offload: []string{"none", "optimizer", "params"}, Workers: 2}
	res, err := Run(context.Background(), base, space)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 0 || res.Stats.HostShort == 0 || res.Stats.HostShort != res.Stats.Replayed {
		t.Errorf("without nvme: %d rows, %d of %d replays short of host memory (want none, all)", len(res.Rows), res.Stats.HostShort, res.Stats.Replayed)
	}
	space.Offload = append(space.Offload, "nvme")
	res, err = Run(context.Background(), base, space)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		t.Fatalf("with nvme: no layout fits: %+v", res.Stats)
	}
	for _, r := range res.Rows {
		o := r.Plan.Offload
		if o == nil || o.Optimizer != "nvme" || o.Params != "cpu" || r.Sharding != "zero3" {
			t.Errorf("%s %s: offload %+v fits", r.Plan.Parallel, r.Sharding, o)
			continue
		}
		want := int64(4*p + 4*4*1_000_000_000) // 16-bit partition and gradient buffer, 4 fp32 swap buffers
		if got := r.Report.HostMemory; got < want || float64(got) > 1.01*float64(want) {
			t.Errorf("%s: host memory per GPU %d B, hand count %d B (+1%%)", r.Plan.Parallel, got, want)
		}
		if r.Report.Traffic.NVMe <= 0 {
			t.Errorf("%s: no NVMe traffic in the step", r.Plan.Parallel)
		}
	}
	if res.Stats.HostShort == 0 {
		t.Errorf("with nvme: the host-offloaded layouts passed the host check: %+v", res.Stats)
	}
}

// An offload list that applies to no sharding of the list leaves the
// space empty whatever the degrees: refused with the shardings each
// offload applies to.
func TestSearchOffloadWithoutSharding(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(256, 2, 8, 8, 1024, 32000, "flash"), 1, 512, "bf16-mixed", "none", "H100-80GB")
	for _, c := range []struct {
		offload, sharding []string
		refused           bool
	}{
		{[]string{"nvme"}, []string{"zero1", "zero2", "fsdp"}, true},
		{[]string{"params"}, []string{"ddp", "zero2"}, true},
		{[]string{"optimizer"}, []string{"ddp", "fsdp"}, true},
		{[]string{"nvme"}, []string{"zero2", "zero3"}, false},
		{[]string{"optimizer", "nvme"}, []string{"zero2"}, false},
		{[]string{"none", "nvme"}, []string{"ddp"}, false},
	} {
		_, err := Space{GPUs: 8, GlobalBatch: 8, Offload: c.offload, Sharding: c.sharding}.defaults(base)
		if (err != nil) != c.refused {
			t.Errorf("offload %q, sharding %q: error %v, want refused %v", c.offload, c.sharding, err, c.refused)
		}
	}
}
