package search

import (
	"reflect"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestSpaceGaps: the combinations of degrees that make no layout are
// counted by cause with the values at fault, and a space with no layout
// at all says why. A Llama of 4 layers (8 heads) on 8 GPUs; each row
// narrows the space one way.
func TestSpaceGaps(t *testing.T) {
	llama := testmodels.LlamaPlan(testmodels.Llama(1024, 4, 8, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	for _, row := range []struct {
		name    string
		base    *core.Plan
		sp      Space
		layouts bool // the space still has layouts
		want    []Reason
	}{
		{"batch of one", llama, Space{GPUs: 8, GlobalBatch: 1, TP: []int64{1, 2, 4}, PP: []int64{1}, CP: []int64{1}}, false,
			[]Reason{{"dp = gpus / (tp x cp x pp) = 2, 4 or 8 does not divide the global batch of 1 sequence", 3}}},
		{"tp 8 leaves dp 1", llama, Space{GPUs: 8, GlobalBatch: 1, TP: []int64{1, 8}, PP: []int64{1}, CP: []int64{1}}, true,
			[]Reason{{"dp = gpus / (tp x cp x pp) = 8 does not divide the global batch of 1 sequence", 1}}},
		{"products over the GPUs", llama, Space{GPUs: 4, GlobalBatch: 8, TP: []int64{8}, PP: []int64{1, 2}, CP: []int64{1}}, false,
			[]Reason{{"tp x cp x pp = 8 or 16 does not divide the 4 GPUs", 2}}},
		{"micro-batch of the list", llama, Space{GPUs: 8, GlobalBatch: 8, TP: []int64{1, 2}, PP: []int64{1}, CP: []int64{1}, MicroBatch: []int64{3}}, false,
			[]Reason{{"no micro_batch of [3] divides the sequences of a data-parallel replica (1 or 2)", 2}}},
		{"virtual stages of the list", llama, Space{GPUs: 8, GlobalBatch: 8, TP: []int64{1}, PP: []int64{1, 2}, CP: []int64{1}, Virtual: []int64{3}}, true,
			[]Reason{{"pp=2: no virtual_stages of [3] splits the model's blocks over the stages", 1}}},
		{"hsdp on two ranks", llama, Space{GPUs: 8, GlobalBatch: 8, TP: []int64{4}, PP: []int64{1}, CP: []int64{1}, Sharding: []string{"hsdp"}}, false,
			[]Reason{{"dp=2: no sharding of [\"hsdp\"] runs there (hsdp needs more than one replica and more than one shard; offload= adds layouts to some shardings only)", 1}}},
		// Every divisor of the GPUs on each axis: their products past 8
		// (the notes name them only when no layout is left).
		{"the whole space", llama, Space{GPUs: 8, GlobalBatch: 8}, true,
			[]Reason{{"tp x cp x pp = 16, 32, 64, 128 or 256 does not divide the 8 GPUs", 29}}},
	} {
		t.Run(row.name, func(t *testing.T) {
			sp, err := row.sp.defaults(row.base)
			if err != nil {
				t.Fatal(err)
			}
			layouts, got, err := sp.enumerate(row.base)
			if err != nil {
				t.Fatal(err)
			}
			if (len(layouts) > 0) != row.layouts || !reflect.DeepEqual(got, row.want) {
				t.Errorf("%d layouts, skipped %+v;\nwant layouts %v, skipped %+v", len(layouts), got, row.layouts, row.want)
			}
		})
	}
}
