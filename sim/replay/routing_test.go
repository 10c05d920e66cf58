package replay

import (
	"testing"

	"github.com/memsh/memsh/sim/alloc"
)

// TestRoutedRowsTwoMicroBatches hand-counts what the caching allocator
// does with one MoE layer's routed buffer in two micro-batches (sizes in
// MiB): micro-batch 1 allocates its received rows R1 and a 22 MiB tensor
// it keeps (a saved activation, S), then frees R1; micro-batch 2
// allocates R2. Segments of their own (no expandable segments):
//   - the same rows (R1 = R2 = 32, today's replay): R2 takes R1's freed
//     block, 32 + 22 = 54 reserved;
//   - more rows the second time (28, then 36): the freed 28 MiB block
//     cannot hold 36, which gets a segment of its own: 28 + 22 + 36 = 86
//     reserved, 28 of them cached and unused (the block the allocator
//     cannot reuse);
//   - fewer rows the second time (36, then 28): R2 splits R1's block and
//     the 8 MiB rest stays cached: 58 reserved.
//
// Expandable segments map 20 MiB pages of one range (alloc's
// allocator_expandable.go). The same rows: R1 32 maps two pages [0,40),
// S runs from the free [32,40) into a third page, [32,54); R2 takes R1's
// freed [0,32) again: 60 mapped. More rows the second time: R1 28, S
// [28,50); R2 36 fits in no free block (the freed [0,28) lies below S)
// and runs from the free [50,60) into two new pages: 100 mapped, the
// hole below S as idle as the separate segment's above. Fewer: R2 28
// fits in R1's freed [0,36): 60. One layer's two sizes fragment either
// way; what a whole step's many sizes do is TestExpertSpreadDeepSeekV3
// (sim).
func TestRoutedRowsTwoMicroBatches(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name       string
		r1, r2     int64
		expandable bool
		reserved   int64
	}{
		{"same rows", 32, 32, false, 54},
		{"more rows the second time", 28, 36, false, 86},
		{"fewer rows the second time", 36, 28, false, 58},
		{"same rows, expandable", 32, 32, true, 60},
		{"more rows the second time, expandable", 28, 36, true, 100},
		{"fewer rows the second time, expandable", 36, 28, true, 60},
	} {
		a := alloc.Allocator{Limit: 1 << 40, Expandable: c.expandable}
		r1, _ := a.Alloc(c.r1 * mib)
		if _, ok := a.Alloc(22 * mib); !ok {
			t.Fatalf("%s: S does not fit", c.name)
		}
		a.Release(r1)
		if _, ok := a.Alloc(c.r2 * mib); !ok {
			t.Fatalf("%s: R2 does not fit", c.name)
		}
		if a.Reserved != c.reserved*mib || a.Allocated != (22+c.r2)*mib {
			t.Errorf("%s: %d MiB reserved, %d allocated; want %d and %d", c.name, a.Reserved/mib, a.Allocated/mib, c.reserved, 22+c.r2)
		}
	}
}

// TestSpreadDraw: the draws lie in [-1, 1), are the same for the same
// layer instance and step, and cover the range evenly (mean near 0 over
// many layer instances, extremes near both ends).
func TestSpreadDraw(t *testing.T) {
	const n = 20000
	sum, lo, hi := 0.0, 1.0, -1.0
	for a := range uint64(n) {
		for step := range uint64(2) {
			d := spreadDraw(a, step)
			if d < -1 || d >= 1 {
				t.Fatalf("draw(%d, %d) = %g, outside [-1, 1)", a, step, d)
			}
			if d != spreadDraw(a, step) {
				t.Fatalf("draw(%d, %d) differs between calls", a, step)
			}
			sum += d
			lo, hi = min(lo, d), max(hi, d)
		}
	}
	if mean := sum / (2 * n); mean < -0.02 || mean > 0.02 || lo > -0.99 || hi < 0.99 {
		t.Errorf("draws: mean %.4f, range [%.4f, %.4f]; want a mean near 0 and the range near [-1, 1)", mean, lo, hi)
	}
	if spreadDraw(7, 0) == spreadDraw(7, 1) || spreadDraw(7, 0) == spreadDraw(8, 0) {
		t.Error("the draws repeat across steps or layer instances")
	}
}
