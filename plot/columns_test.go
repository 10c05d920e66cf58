package plot

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/sim/replay"
)

// pts builds a timeline from (phase, allocated) pairs; reserved is
// allocated rounded up to 10.
func pts(spec ...any) []replay.Point {
	var tl []replay.Point
	for i := 0; i+1 < len(spec); i += 2 {
		a := int64(spec[i+1].(int))
		ph, _ := replay.ParsePhase(spec[i].(string))
		tl = append(tl, replay.Point{Phase: ph, Allocated: a, Reserved: (a + 9) / 10 * 10})
	}
	return tl
}

func TestColumns(t *testing.T) {
	// 40 forward events ramping 1..40, then 2 optimizer events.
	var spec []any
	for i := 1; i <= 40; i++ {
		spec = append(spec, "forward", i)
	}
	spec = append(spec, "optimizer", 50, "optimizer", 45)
	tl := pts(spec...)

	type col struct{ First, Last, At int }
	get := func(cols []column) []col {
		var out []col
		for _, c := range cols {
			out = append(out, col{c.first, c.last, c.at})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		n       int
		want    []col
		widened bool
	}{
		// 42 events in 20 columns: optimizer's 2/42 = 4.8% share is raised
		// to 5% (1 column), forward keeps the other 95% (19 columns of
		// 40 events: 2 or 3 each), each column represented by its highest
		// event (the last, on a ramp).
		{"downsampled", 20, []col{
			{0, 1, 1}, {2, 3, 3}, {4, 5, 5}, {6, 7, 7}, {8, 9, 9}, {10, 11, 11}, {12, 13, 13}, {14, 15, 15},
			{16, 17, 17}, {18, 20, 20}, {21, 22, 22}, {23, 24, 24}, {25, 26, 26}, {27, 28, 28}, {29, 30, 30},
			{31, 32, 32}, {33, 34, 34}, {35, 36, 36}, {37, 39, 39}, {40, 41, 40},
		}, true},
		// 100 columns for 42 events: optimizer gets 5 columns for its 2
		// events (repeating them), forward 95 for its 40.
		{"optimizer widened", 100, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols, widened := layout(tl, tc.n)
			if widened != tc.widened {
				t.Errorf("widened = %v, want %v", widened, tc.widened)
			}
			if tc.want != nil {
				if d := cmp.Diff(tc.want, get(cols)); d != "" {
					t.Errorf("columns (-want +got):\n%s", d)
				}
			}
			opt := 0
			for _, c := range cols {
				if c.pt.Phase == replay.PhaseOptimizer {
					opt++
				}
			}
			if want := int(float64(tc.n)*minPhaseShare + 0.5); opt != max(want, 1) {
				t.Errorf("optimizer columns = %d, want %d", opt, max(want, 1))
			}
			// The highest event survives downsampling.
			if i := peakEvent(tl); cols[columnOf(cols, i)].at != i {
				t.Errorf("peak event %d is not the representative of its column", i)
			}
		})
	}
}

func TestPhaseShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		segs [][2]int
		want []float64
	}{
		{"proportional", [][2]int{{0, 50}, {50, 100}}, []float64{0.5, 0.5}},
		// 1 of 100 events: raised to 0.05, the other takes 0.95.
		{"raised", [][2]int{{0, 99}, {99, 100}}, []float64{0.95, 0.05}},
		// setup 10, forward 40, backward 49, optimizer 1 of 100: optimizer
		// raised to 0.05; the rest share 0.95 in proportion 10:40:49.
		{"four phases", [][2]int{{0, 10}, {10, 50}, {50, 99}, {99, 100}},
			[]float64{0.95 * 10 / 99, 0.95 * 40 / 99, 0.95 * 49 / 99, 0.05}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := phaseShares(tc.segs, tc.segs[len(tc.segs)-1][1])
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 })); d != "" {
				t.Errorf("shares (-want +got):\n%s", d)
			}
		})
	}
}

func TestEventOf(t *testing.T) {
	tl := []replay.Point{
		{Phase: replay.PhaseForward, Op: "a", Allocated: 100},
		{Phase: replay.PhaseForward, Op: "b", Allocated: 612},  // +512: b's allocation
		{Phase: replay.PhaseForward, Op: "b", Allocated: 100},  // freed
		{Phase: replay.PhaseBackward, Op: "b", Allocated: 612}, // same size, other phase
	}
	for _, tc := range []struct {
		name string
		a    replay.Alloc
		want int
	}{
		{"forward b", replay.Alloc{Phase: replay.PhaseForward, Op: "b", Bytes: 500}, 1},
		{"backward b", replay.Alloc{Phase: replay.PhaseBackward, Op: "b", Bytes: 512}, 3},
		{"too big", replay.Alloc{Phase: replay.PhaseForward, Op: "b", Bytes: 513}, -1},
		{"no bytes", replay.Alloc{}, -1},
	} {
		if got := eventOf(tl, tc.a); got != tc.want {
			t.Errorf("%s: eventOf = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestByteTicks(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	for _, tc := range []struct {
		top      int64
		step     int64
		label    string // label of the second tick
		unitName string
	}{
		{10 * GiB, 2 * GiB, "2 GiB", "GiB"},       // 10/1 = 10 ticks too many; 10/2 = 5
		{7 * GiB, 1 * GiB, "1 GiB", "GiB"},        // 7 < 8
		{1536 * MiB, 200 * MiB, "200 MiB", "MiB"}, // 1536/100 = 15; 1536/200 = 7
		{80 * GiB, 20 * GiB, "20 GiB", "GiB"},     // 80/10 = 8 is not < 8
		{3000, 500, "500 B", "B"},
	} {
		step, unit, name := byteTicks(tc.top, 8)
		if step != tc.step || name != tc.unitName || tickLabel(step, unit, name) != tc.label {
			t.Errorf("byteTicks(%d) = %d %s (%q), want %d %s (%q)", tc.top, step, name, tickLabel(step, unit, name), tc.step, tc.unitName, tc.label)
		}
	}
	if got := tickLabel(0, GiB, "GiB"); got != "0" {
		t.Errorf("tickLabel(0) = %q", got)
	}
}

func TestWidths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		share []float64
		n     int
		want  []int
	}{
		// rounding each to nearest gives 3 + 29 + 29 = 61: the one column
		// left after rounding down goes to the first largest remainder.
		{"halves", []float64{0.05, 0.475, 0.475}, 60, []int{3, 29, 28}},
		// 3.6 + 3.6 + 2.8: rounding to nearest gives 4 + 4 + 3 = 11.
		{"over by rounding", []float64{0.36, 0.36, 0.28}, 10, []int{4, 3, 3}},
		// the one-column floors take 2 of 10: the widest gives one back.
		{"floors", []float64{0.02, 0.02, 0.96}, 10, []int{1, 1, 8}},
		{"more segments than columns", []float64{0.25, 0.25, 0.25, 0.25}, 2, []int{1, 1, 1, 1}},
	} {
		if got := widths(tc.share, tc.n); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: widths %v, want %v", tc.name, got, tc.want)
		}
	}
}
