package search

import (
	"context"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// TestSearchAllGatherCP: cp_mode=["ring", "allgather"] explores torch's
// context_parallel() (torchtitan's default rotate method) beside the
// ring. Every allgather row is a full replay of its plan; against the
// ring layout that differs only in the mode it is never faster (its
// gathers are hidden under attention as the ring's sends are) and, where
// attention's backward is the peak, allocates more (every rank's keys and
// values at once, the fp32 merges), though the allocator may place that
// in as little reserved memory (at cp 4 here, 18 MiB less device memory
// than the ring): the default space leaves it out, asked for it joins.
func TestSearchAllGatherCP(t *testing.T) {
	// A short vocabulary and long sequences: the peak is in attention's
	// backward, not at the loss.
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 1024, "sdpa"), 1, 65536, "bf16-mixed", "full", "H100-80GB")
	space := Space{GPUs: 8, GlobalBatch: 8, TP: []int64{1}, PP: []int64{1}, CP: []int64{2, 4},
		Sharding: []string{"fsdp"}, CPModes: []string{"ring", "allgather"}, MicroBatch: []int64{1}, Checkpoint: []string{"full"}, Workers: 2}
	res, err := Run(context.Background(), base, space)
	if err != nil {
		t.Fatal(err)
	}
	ring := map[string]Row{}
	var gathered []Row
	for _, r := range res.Rows {
		par := r.Plan.Parallel
		switch par.CPMode {
		case "allgather":
			gathered = append(gathered, r)
		case "":
			ring[par.String()] = r
		default:
			t.Errorf("%s: a mode the space did not ask for", par)
		}
	}
	if len(gathered) != 2 || len(ring) != 2 {
		t.Fatalf("%d allgather and %d ring rows; want 2 each (cp 2 and 4)", len(gathered), len(ring))
	}
	for _, g := range gathered {
		par := g.Plan.Parallel
		par.CPMode = ""
		r, ok := ring[par.String()]
		if !ok {
			t.Errorf("%s: no ring row", g.Plan.Parallel)
			continue
		}
		if g.Report.Time.StepSeconds < r.Report.Time.StepSeconds {
			t.Errorf("%s: %.4f s, faster than the ring's %.4f s", g.Plan.Parallel, g.Report.Time.StepSeconds, r.Report.Time.StepSeconds)
		}
		if g.Report.PeakAllocated <= r.Report.PeakAllocated {
			t.Errorf("%s: peak %d bytes, not above the ring's %d", g.Plan.Parallel, g.Report.PeakAllocated, r.Report.PeakAllocated)
		}
		t.Logf("%s: %.4f s, peak %.2f GiB, device %.3f GiB; ring %.4f s, %.2f GiB, device %.3f GiB", g.Plan.Parallel, g.Report.Time.StepSeconds, float64(g.Report.PeakAllocated)/(1<<30), float64(g.Report.DeviceUsed)/(1<<30),
			r.Report.Time.StepSeconds, float64(r.Report.PeakAllocated)/(1<<30), float64(r.Report.DeviceUsed)/(1<<30))
	}
}

// The default space tries the ring and Ulysses only; an unknown mode is
// an error naming the three.
func TestSearchCPModes(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "sdpa"), 1, 8192, "bf16-mixed", "full", "H100-80GB")
	sp, err := Space{GPUs: 8, GlobalBatch: 8}.defaults(base)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sp.CPModes, ","); got != "ring,ulysses" {
		t.Errorf("default cp modes %s; want ring,ulysses", got)
	}
	if got := cpModes([]string{"ring", "ulysses", "allgather"}, 2); len(got) != 3 || got[2].parallel() != "allgather" || got[0].parallel() != "" {
		t.Errorf("cpModes at cp 2: %v", got)
	}
	if got := cpModes([]string{"allgather"}, 1); len(got) != 1 || got[0] != cpRing {
		t.Errorf("cpModes at cp 1: %v; want the ring alone", got)
	}
	_, err = Space{GPUs: 8, GlobalBatch: 8, CPModes: []string{"alltoall"}}.defaults(base)
	if err == nil || !strings.Contains(err.Error(), `unknown cp_mode "alltoall" (known: ring, ulysses, allgather)`) {
		t.Errorf("cp_mode alltoall: %v", err)
	}
}
