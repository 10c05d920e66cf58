package search

import (
	"context"
	"reflect"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// The front's walk replays a wave of layouts per worker in parallel and
// counts what a walk of one layout at a time would: the rows, the front
// and every count are the same on one core as on several.
func TestSearchSameOnAnyCores(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	base.Device.Memory = 3 << 30
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
