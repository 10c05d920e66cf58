package search

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// resultDigest is a search result as text: its counts, and each row and
// front layout with its replay's step time (exact bits) and memory.
func resultDigest(res *Result) string {
	s := fmt.Sprintf("%+v\n", res.Stats)
	for _, part := range []struct {
		what string
		rows []Row
	}{{"row", res.Rows}, {"front", res.Front}} {
		for i, r := range part.rows {
			s += fmt.Sprintf("%s %d %s front=%v step=%b mem=%d peak=%d fits=%v time=%+v\n", part.what, i, rowName(r.Plan, r.Sharding),
				r.Front, r.Report.Time.StepSeconds, DeviceMemory(r.Report), r.Report.PeakAllocated, r.Report.Fits, r.Report.Time)
		}
	}
	return s
}

// TestSearchDigest prints the digests of the benchmarks' searches
// (MEMSH_SEARCH_DIGEST=1): a before/after check of a change that must
// not change any result.
func TestSearchDigest(t *testing.T) {
	if os.Getenv("MEMSH_SEARCH_DIGEST") == "" {
		t.Skip("MEMSH_SEARCH_DIGEST=1 prints the digests")
	}
	small := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(small, 3<<30)
	p70 := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	p405 := testmodels.LlamaPlan(llama3_405B(), 1, 8192, "megatron", "none", "H100-80GB")
	for _, c := range []struct {
		name  string
		base  *core.Plan
		space Space
	}{
		{"small", small, Space{GPUs: 16, GlobalBatch: 64, TP: []int64{1, 4}, PP: []int64{1, 2, 4}, CP: []int64{1, 2},
			MicroBatch: []int64{1, 2}, Virtual: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero3"}, CPModes: []string{"ring"}, Top: 8, Workers: 2}},
		{"70B", p70, Space{GPUs: 1024, GlobalBatch: 1024, Top: 10, Workers: 2}},
		{"405B", p405, Space{GPUs: 16384, GlobalBatch: 2048, Top: 10, Workers: 2}},
	} {
		res, err := Run(context.Background(), c.base, c.space)
		if err != nil {
			t.Fatal(err)
		}
		d := resultDigest(res)
		t.Logf("%s: %x (%d rows, %d front)", c.name, sha256.Sum256([]byte(d)), len(res.Rows), len(res.Front))
		if out := os.Getenv("MEMSH_SEARCH_DIGEST"); out != "1" {
			if err := os.WriteFile(out+"."+c.name, []byte(d), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Run prices a profile only when the memory bound keeps one of its
// layouts (search.go): with every profile priced the whole result is the
// same, the rows, the front, their replays and every count, on a small
// cluster whose memory prunes and on the 70B search (narrowed as
// TestSearchLlama70B1024 narrows it), and the bound prunes every layout
// of some profiles there (the lever has work to do).
func TestSearchPricesKeptProfilesOnly(t *testing.T) {
	small := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(small, 3<<30)
	cases := []struct {
		name  string
		base  *core.Plan
		space Space
	}{
		{"small", small, Space{GPUs: 16, GlobalBatch: 64, TP: []int64{1, 4}, PP: []int64{1, 2, 4}, CP: []int64{1, 2},
			MicroBatch: []int64{1, 2}, Virtual: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero3"}, CPModes: []string{"ring"}, Top: 8, Workers: 2}},
		{"small, one worker", small, Space{GPUs: 8, GlobalBatch: 16, Top: 10, Workers: 1, Checkpoint: []string{"none", "full"}}},
	}
	if !testing.Short() {
		cases = append(cases, struct {
			name  string
			base  *core.Plan
			space Space
		}{"70B", testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB"),
			Space{GPUs: 1024, GlobalBatch: 1024, Top: 10, Workers: 2, Checkpoint: []string{"none", "full"}, CPModes: []string{"ring"}}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lazy, err := Run(context.Background(), c.base, c.space)
			if err != nil {
				t.Fatal(err)
			}
			c.space.priceAll = true
			all, err := Run(context.Background(), c.base, c.space)
			if err != nil {
				t.Fatal(err)
			}
			if lazy.Stats.PrunedStates+lazy.Stats.PrunedMemory == 0 || len(lazy.Front) < 2 {
				t.Fatalf("the space no longer prunes by memory: %+v, front %d", lazy.Stats, len(lazy.Front))
			}
			if lazy.Stats.Priced >= lazy.Stats.Profiles || all.Stats.Priced != all.Stats.Profiles {
				t.Errorf("priced %d of %d profiles, every one %d of %d: the bound prunes no profile whole", lazy.Stats.Priced, lazy.Stats.Profiles, all.Stats.Priced, all.Stats.Profiles)
			}
			t.Logf("priced %d of %d profiles", lazy.Stats.Priced, lazy.Stats.Profiles)
			all.Stats.Priced = lazy.Stats.Priced
			if !reflect.DeepEqual(lazy, all) {
				t.Errorf("pricing kept profiles only:\n%s\nevery profile priced:\n%s", resultDigest(lazy), resultDigest(all))
			}
		})
	}
}
