package replay

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// The accumulation copies each micro-step issues (what the time model
// places on each micro-step's reduction stream) sum to the step's count
// the replay prices: stage 2 1, 2, ..., 2 (2g - 1), stage 1 2 at the
// last micro-step only, none with one micro-step or at stage 3.
func TestAccumulateCopiesAt(t *testing.T) {
	for _, row := range []struct {
		zero int
		g    int64
		each []int64
	}{
		{2, 1, []int64{0}},
		{2, 2, []int64{1, 2}},
		{2, 4, []int64{1, 2, 2, 2}},
		{1, 1, []int64{0}},
		{1, 4, []int64{0, 0, 0, 2}},
		{3, 4, []int64{0, 0, 0, 0}},
		{0, 4, []int64{0, 0, 0, 0}},
	} {
		plan := &core.Plan{GradAccum: row.g}
		var sum int64
		for k := range row.g {
			got := AccumulateCopiesAt(row.zero, k, row.g)
			if got != row.each[k] {
				t.Errorf("zero=%d, %d micro-steps: micro-step %d issues %d copies, want %d", row.zero, row.g, k, got, row.each[k])
			}
			sum += got
		}
		if total := AccumulateCopies(plan, row.zero); total != sum {
			t.Errorf("zero=%d, %d micro-steps: %d copies per step, the micro-steps issue %d", row.zero, row.g, total, sum)
		}
		if AccumulateCopiesAt(row.zero, row.g, row.g) != 0 || AccumulateCopiesAt(row.zero, -1, row.g) != 0 {
			t.Errorf("zero=%d: a micro-step outside the step issues copies", row.zero)
		}
	}
}
