package search

import (
	"reflect"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// The shapes of a run share one split per key (splitTable): the shared
// split is the one each shape would work out alone, a second shape of
// the key gets the same one, and a split whose settings differ in any
// field ChunkLayers reads gets its own.
func TestSplitTableSharesSplits(t *testing.T) {
	cases := []struct {
		name string
		par  core.Parallelism
		n    int64
		err  bool
	}{
		{"even", core.Parallelism{PP: 4}, 80, false},
		{"interleaved", core.Parallelism{PP: 4, Schedule: "interleaved", VirtualStages: 5}, 80, false},
		{"even pp=2", core.Parallelism{PP: 2}, 80, false},
		{"slots", core.Parallelism{PP: 2, EmbeddingSlot: true, LossSlot: true}, 80, false},
		{"torchtitan", core.Parallelism{PP: 3, StageSplit: "torchtitan"}, 80, false},
		{"first and last", core.Parallelism{PP: 4, FirstStageLayers: 11, LastStageLayers: 9}, 80, false},
		{"first and last swapped", core.Parallelism{PP: 4, FirstStageLayers: 9, LastStageLayers: 11}, 80, false},
		{"first only", core.Parallelism{PP: 4, FirstStageLayers: 11}, 80, false},
		{"other n", core.Parallelism{PP: 4}, 40, false},
		{"uneven refused", core.Parallelism{PP: 3}, 80, true},
	}
	table := &splitTable{}
	seen := map[*chunkSplit]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			par := c.par.Norm()
			got := table.of(par, c.n)
			if again := table.of(par, c.n); again != got {
				t.Errorf("a second shape of the split got a split of its own")
			}
			if other, ok := seen[got]; ok {
				t.Errorf("split shared with %q, whose settings differ", other)
			}
			seen[got] = c.name
			if (got.err != nil) != c.err {
				t.Fatalf("err = %v, want an error: %v", got.err, c.err)
			}
			alone := newChunkSplit(par, c.n)
			if got.err != nil {
				if got.err.Error() != alone.err.Error() {
					t.Errorf("shared error %q, alone %q", got.err, alone.err)
				}
				return
			}
			if !reflect.DeepEqual(got, alone) {
				t.Errorf("shared split %+v, alone %+v", got, alone)
			}
			var nilTable *splitTable
			if own := nilTable.of(par, c.n); own == got || !reflect.DeepEqual(own, alone) {
				t.Errorf("a nil table's split %+v (shared: %v), want %+v, its own", own, own == got, alone)
			}
		})
	}
}
