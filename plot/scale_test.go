package plot

import (
	"math"
	"strings"
	"testing"
)

func TestNewScale(t *testing.T) {
	const GiB = 1 << 30
	labels := func(s scale) string {
		var out []string
		for _, tk := range s.ticks {
			out = append(out, tk.label)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name   string
		values []float64
		unit   string
		lo, hi float64
		log    bool
		ticks  string
	}{
		// 35 GiB: span 35/6 = 5.8 per tick, so steps of 10 GiB; 40 is
		// 12% above the top point, no extra step.
		{"bytes in GiB", []float64{10 * GiB, 20 * GiB, 35 * GiB}, UnitBytes, 0, 40 * GiB, false, "0 10 GiB 20 GiB 30 GiB 40 GiB"},
		// 39.5 GiB is within 3% of 40: one more step so it is not on the frame.
		{"a point at the top gets room", []float64{39.5 * GiB}, UnitBytes, 0, 50 * GiB, false, "0 10 GiB 20 GiB 30 GiB 40 GiB 50 GiB"},
		// 0.9 GiB is below 1 GiB: MiB, 921.6/6 = 153.6 -> steps of 200.
		{"bytes in MiB", []float64{0.9 * GiB}, UnitBytes, 0, 1000 * (1 << 20), false, "0 200 MiB 400 MiB 600 MiB 800 MiB 1000 MiB"},
		// headroom can be negative: the axis spans zero, 34.2/6 = 5.7 -> 10.
		{"negative bytes", []float64{-34.2 * GiB, 18.3 * GiB}, UnitBytes, -40 * GiB, 20 * GiB, false, "-40 GiB -30 GiB -20 GiB -10 GiB 0 10 GiB 20 GiB"},
		// 1.18 s: seconds, 1.18/6 = 0.197 -> 0.2 s with one decimal.
		{"seconds", []float64{0.0396, 1.18}, UnitSeconds, 0, 1.2, false, "0 0.2 s 0.4 s 0.6 s 0.8 s 1.0 s 1.2 s"},
		// 304 ms: milliseconds, 304/6 = 50.7 -> 100 ms.
		{"milliseconds", []float64{0.0396, 0.304}, UnitSeconds, 0, 0.4, false, "0 100 ms 200 ms 300 ms 400 ms"},
		// 243 is above half of 304: the axis fits the data, 61/6 = 10.2
		// -> 20 ms, from 240 to 320 ms.
		{"milliseconds, not from zero", []float64{0.243, 0.304}, UnitSeconds, 0.24, 0.32, false, "240 ms 260 ms 280 ms 300 ms 320 ms"},
		// MFU 0.467: percent, 46.7/6 = 7.8 -> 10%.
		{"fractions", []float64{0.184, 0.467}, UnitFraction, 0, 0.5, false, "0 10% 20% 30% 40% 50%"},
		// 69,863 tokens/s: 69863/6 = 11644 -> 20,000.
		{"plain numbers", []float64{12488, 69863}, "", 0, 80000, false, "0 20,000 40,000 60,000 80,000"},
		// Powers of two spanning 32x: log axis with half a power of margin.
		{"powers of two", []float64{1, 2, 4, 8, 16, 32}, "", 1 / math.Sqrt2, 32 * math.Sqrt2, true, "1 2 4 8 16 32"},
		// Spanning 4x: log too.
		{"powers of two, 4x", []float64{2, 4, 8}, "", 2 / math.Sqrt2, 8 * math.Sqrt2, true, "2 4 8"},
		// Spanning 2x: linear; 8 is not above half of 16, so from zero;
		// 16/6 = 2.7 -> 5.
		{"powers of two, 2x", []float64{8, 16}, "", 0, 20, false, "0 5 10 15 20"},
		// Step times of 7.75 to 8.4 s: all above half the largest, so the
		// axis fits the data: 0.65/6 = 0.108 -> 0.2 s; 8.4 is on a tick,
		// so one more.
		{"not from zero", []float64{7.75, 8.4}, UnitSeconds, 7.6, 8.6, false, "7.6 s 7.8 s 8.0 s 8.2 s 8.4 s 8.6 s"},
		// All negative and close together: 1/6 = 0.17 -> 0.2, a step
		// more at each end where a point is on a tick.
		{"negative, not from zero", []float64{-9, -8}, "", -9.2, -7.8, false, "-9.2 -9.0 -8.8 -8.6 -8.4 -8.2 -8.0 -7.8"},
		// 1..4096: 12 powers, every other one labelled.
		{"many powers of two", []float64{1, 4096}, "", 1 / math.Sqrt2, 4096 * math.Sqrt2, true, "1 4 16 64 256 1,024 4,096"},
		{"all zero", []float64{0, 0}, "", 0, 1, false, "0 0.2 0.4 0.6 0.8 1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScale(tc.values, tc.unit, 0, 100)
			if math.Abs(s.lo-tc.lo) > 1e-6*math.Max(1, math.Abs(tc.lo)) || math.Abs(s.hi-tc.hi) > 1e-6*math.Max(1, tc.hi) || s.log != tc.log {
				t.Errorf("range %g..%g log=%v, want %g..%g log=%v", s.lo, s.hi, s.log, tc.lo, tc.hi, tc.log)
			}
			if got := labels(s); got != tc.ticks {
				t.Errorf("ticks %q, want %q", got, tc.ticks)
			}
		})
	}
}

func TestScaleAt(t *testing.T) {
	lin := scale{lo: 0, hi: 40, p0: 440, p1: 84}
	if got := lin.at(30); got != 440-356*0.75 {
		t.Errorf("linear at(30) = %g, want 173", got)
	}
	// log2: 1/√2 .. 32√2 is 6 powers of two over 600 pixels, so 100 px a
	// power and 1 sits half a power (50 px) in.
	log := scale{lo: 1 / math.Sqrt2, hi: 32 * math.Sqrt2, log: true, p0: 0, p1: 600}
	for v, want := range map[float64]float64{1: 50, 2: 150, 32: 550} {
		if got := log.at(v); math.Abs(got-want) > 1e-9 {
			t.Errorf("log at(%g) = %g, want %g", v, got, want)
		}
	}
}

func TestValueLabels(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		axis string // valueLabel
		tip  string // pointValue
	}{
		{1 << 30, UnitBytes, "1 GiB", "1.00 GiB"},
		{9.47e9, UnitBytes, "8.82 GiB", "8.82 GiB"},
		{512 << 20, UnitBytes, "512 MiB", "512.00 MiB"},
		{0.304, UnitSeconds, "304 ms", "304 ms"},
		{7.75, UnitSeconds, "7.75 s", "7.75 s"},
		{0.467, UnitFraction, "46.7%", "46.7%"},
		{65536, "", "65,536", "65,536"},
		{1082602.4, "", "1,082,602", "1,082,602"},
		{0.25, "", "0.25", "0.25"},
		{8, "", "8", "8"},
	} {
		if got := valueLabel(tc.v, tc.unit); got != tc.axis {
			t.Errorf("valueLabel(%g, %q) = %q, want %q", tc.v, tc.unit, got, tc.axis)
		}
		if got := pointValue(tc.v, tc.unit); got != tc.tip {
			t.Errorf("pointValue(%g, %q) = %q, want %q", tc.v, tc.unit, got, tc.tip)
		}
	}
}
