package search

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// The front's walk replays a wave of layouts per worker in parallel and
// counts what a walk of one layout at a time would: the rows, the front
// and every count are the same on one core as on several.
func TestSearchSameOnAnyCores(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 3<<30)
	space := Space{GPUs: 16, GlobalBatch: 64, TP: []int64{1, 4}, PP: []int64{1, 2, 4}, CP: []int64{1, 2},
		MicroBatch: []int64{1, 2}, Virtual: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero3"},
		CPModes: []string{"ring"}, Top: 8}
	var want *Result
	for _, workers := range []int{1, 3, 8} {
		space.Workers = workers
		res, err := Run(context.Background(), base, space)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = res
			if res.Stats.StageDominated == 0 || res.Stats.Dominated == 0 || len(res.Front) < 2 {
				t.Fatalf("the space no longer exercises the front's walk: %+v, front %d", res.Stats, len(res.Front))
			}
			continue
		}
		if !reflect.DeepEqual(res.Stats, want.Stats) {
			t.Errorf("%d workers: %+v, one worker %+v", workers, res.Stats, want.Stats)
		}
		if len(res.Front) != len(want.Front) || len(res.Rows) != len(want.Rows) {
			t.Fatalf("%d workers: front %d, rows %d; one worker %d, %d", workers, len(res.Front), len(res.Rows), len(want.Front), len(want.Rows))
		}
		for i, f := range res.Front {
			if w := want.Front[i]; rowName(f.Plan, f.Sharding) != rowName(w.Plan, w.Sharding) || f.Sharding != w.Sharding || DeviceMemory(f.Report) != DeviceMemory(w.Report) {
				t.Errorf("%d workers: front %d is %s %s, one worker's %s %s", workers, i, f.Plan.Parallel, f.Sharding, w.Plan.Parallel, w.Sharding)
			}
		}
		for i, r := range res.Rows {
			if w := want.Rows[i]; rowName(r.Plan, r.Sharding) != rowName(w.Plan, w.Sharding) || r.Sharding != w.Sharding {
				t.Errorf("%d workers: row %d is %s %s, one worker's %s %s", workers, i, r.Plan.Parallel, r.Sharding, w.Plan.Parallel, w.Sharding)
			}
		}
	}
}

// The walk times a layout only when it comes up by a lower bound of its
// step time; timing every layout first (the eager walk) gives the same
// rows, front and counts.
func TestSearchLazyTimesAsEager(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 3<<30)
	spaces := []Space{
		{GPUs: 16, GlobalBatch: 64, TP: []int64{1, 4}, PP: []int64{1, 2, 4}, CP: []int64{1, 2},
			MicroBatch: []int64{1, 2}, Virtual: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero3"},
			CPModes: []string{"ring"}, Top: 8, Workers: 3},
		{GPUs: 8, GlobalBatch: 16, Top: 10, Workers: 1, Checkpoint: []string{"none", "full"}},
		{GPUs: 8, GlobalBatch: 16, Workers: 2, TP: []int64{1, 2}, PP: []int64{1, 2}, MicroBatch: []int64{2}, Checkpoint: []string{"none", "op"}}, // every layout that fits
	}
	for si, space := range spaces {
		toyMemory(base, []int64{3 << 30, 12 << 30, 12 << 30}[si])
		lazy, err := Run(context.Background(), base, space)
		if err != nil {
			t.Fatal(err)
		}
		space.eager = true
		eager, err := Run(context.Background(), base, space)
		if err != nil {
			t.Fatal(err)
		}
		if (space.Top > 0 && eager.Stats.Dominated == 0) || len(eager.Front) < 2 {
			t.Fatalf("space %d no longer exercises the walk: %+v, front %d", si, eager.Stats, len(eager.Front))
		}
		if !reflect.DeepEqual(lazy.Stats, eager.Stats) {
			t.Errorf("space %d: lazy %+v\neager %+v", si, lazy.Stats, eager.Stats)
		}
		for _, c := range []struct {
			what        string
			lazy, eager []Row
		}{{"rows", lazy.Rows, eager.Rows}, {"front", lazy.Front, eager.Front}} {
			if len(c.lazy) != len(c.eager) {
				t.Fatalf("space %d: %d %s, eager %d", si, len(c.lazy), c.what, len(c.eager))
			}
			for i, r := range c.lazy {
				e := c.eager[i]
				if rowName(r.Plan, r.Sharding) != rowName(e.Plan, e.Sharding) || r.Front != e.Front ||
					r.Report.Time.StepSeconds != e.Report.Time.StepSeconds || DeviceMemory(r.Report) != DeviceMemory(e.Report) {
					t.Errorf("space %d: %s %d is %s, eager %s", si, c.what, i, rowName(r.Plan, r.Sharding), rowName(e.Plan, e.Sharding))
				}
			}
		}
		t.Logf("space %d: %d dominated, front %d, rows %d", si, lazy.Stats.Dominated, len(lazy.Front), len(lazy.Rows))
	}
}

// enumerate lists a space of exactly MaxLayouts layouts and refuses one
// more, naming the limit.
func TestEnumerateMaxLayouts(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	sp, err := Space{GPUs: 16, GlobalBatch: 64, TP: []int64{1, 4}, PP: []int64{1, 2, 4}}.defaults(base)
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := sp.enumerate(base)
	if err != nil || len(all) < 100 || cap(all) != len(all) {
		t.Fatalf("%d layouts (room for %d), %v", len(all), cap(all), err)
	}
	for _, c := range []struct {
		max    int
		refuse bool
	}{{len(all), false}, {len(all) + 1, false}, {len(all) - 1, true}, {1, true}} {
		sp.MaxLayouts = c.max
		got, _, err := sp.enumerate(base)
		switch {
		case c.refuse && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d layouts", c.max))):
			t.Errorf("max %d of %d: %v", c.max, len(all), err)
		case !c.refuse && (err != nil || !reflect.DeepEqual(got, all)):
			t.Errorf("max %d of %d: %d layouts, %v", c.max, len(all), len(got), err)
		}
	}
}
