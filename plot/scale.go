package plot

import (
	"math"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Units of a table column, as the table knows them (the same words as
// builtins' column units).
const (
	UnitBytes    = "bytes"    // bytes: ticks in KiB, MiB, GiB, TiB
	UnitSeconds  = "seconds"  // seconds: ticks in µs, ms or s
	UnitFraction = "fraction" // 0..1: ticks in percent
)

// scale maps data values of one axis to pixels, with its ticks.
type scale struct {
	lo, hi float64 // data values at the ends of the axis
	log    bool    // a base-2 logarithmic axis
	p0, p1 float64 // pixels of lo and hi
	ticks  []tick
}

// tick is one labelled value of an axis.
type tick struct {
	v     float64
	label string
}

// at is the pixel of v.
func (s scale) at(v float64) float64 {
	if s.log {
		return s.p0 + (s.p1-s.p0)*(math.Log2(v)-math.Log2(s.lo))/(math.Log2(s.hi)-math.Log2(s.lo))
	}
	return s.p0 + (s.p1-s.p0)*(v-s.lo)/(s.hi-s.lo)
}

// maxLinearTicks bounds the labelled values of a linear axis.
const maxLinearTicks = 8

// zeroShare: a linear axis starts at zero unless that would leave more
// than this share of it empty below the data (step times of 7.7 to 8.4 s
// would be a thin band at the top of a 0-10 s axis).
const zeroShare = 0.5

// newScale lays out an axis over values (finite numbers; at least one)
// between pixels p0 and p1. An axis whose values are all powers of two
// spanning 4x or more (tp, batch, seq, GPUs) is logarithmic, one tick
// per power of two; any other is linear, from zero unless the values
// are all above half the largest (or all negative and below half the
// least), with ticks at 1, 2 or 5 times a power of ten of the unit
// chosen for the largest value.
func newScale(values []float64, unit string, p0, p1 float64) scale {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	if powersOfTwo(values) && hi/lo >= 4 {
		return logScale(lo, hi, unit, p0, p1)
	}
	dlo, dhi := lo, hi // the data's extremes
	if lo == hi || !(lo > 0 && lo > zeroShare*hi) && !(hi < 0 && hi < zeroShare*lo) {
		lo, hi = min(lo, 0), max(hi, 0)
	}
	div, suffix := unitOf(unit, max(math.Abs(lo), math.Abs(hi)))
	slo, shi := lo/div, hi/div
	span := shi - slo
	if span == 0 {
		span = 1 // all values are zero
	}
	step := niceStep(span / (maxLinearTicks - 2))
	// Whole steps around the axis (the tolerance keeps -9/0.2 from
	// flooring to -46), with a step more where a point would sit on the
	// frame (within 1.5% of the axis, about the radius of a dot), unless
	// that end is zero: a point at zero sits on the axis.
	a := math.Floor(slo/step+1e-9) * step
	b := math.Ceil(max(shi, slo+span)/step-1e-9) * step
	if b != 0 && b-dhi/div < 0.015*(b-a) {
		b += step
	}
	if a != 0 && dlo/div-a < 0.015*(b-a) {
		a -= step
	}
	s := scale{lo: a * div, hi: b * div, p0: p0, p1: p1}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	n := int(math.Round((b - a) / step))
	for i := 0; i <= n; i++ {
		v := a + float64(i)*step
		if math.Abs(v) < step/2 {
			v = 0
		}
		s.ticks = append(s.ticks, tick{v: v * div, label: scaledLabel(v, decimals, unit, suffix)})
	}
	return s
}

// logScale is a base-2 axis from lo to hi (powers of two), with half a
// power of two of margin at each end.
func logScale(lo, hi float64, unit string, p0, p1 float64) scale {
	s := scale{lo: lo / math.Sqrt2, hi: hi * math.Sqrt2, log: true, p0: p0, p1: p1}
	powers := int(math.Round(math.Log2(hi / lo)))
	every := 1
	for powers/every >= 10 {
		every *= 2
	}
	for i := 0; i <= powers; i += every {
		v := lo * math.Exp2(float64(i))
		s.ticks = append(s.ticks, tick{v: v, label: valueLabel(v, unit)})
	}
	return s
}

// powersOfTwo says whether every value is a positive integer power of two.
func powersOfTwo(values []float64) bool {
	for _, v := range values {
		if v < 1 || v > 1<<62 || v != math.Trunc(v) {
			return false
		}
		if n := uint64(v); n&(n-1) != 0 {
			return false
		}
	}
	return len(values) > 0
}

// niceStep is the least of 1, 2 or 5 times a power of ten that is at
// least raw.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// unitOf picks the divisor and suffix for an axis whose values reach
// top in magnitude: the largest binary unit of bytes at or below top, s
// or ms or µs, percent for fractions, nothing for plain numbers.
func unitOf(unit string, top float64) (div float64, suffix string) {
	switch unit {
	case UnitBytes:
		units := []struct {
			size float64
			name string
		}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}}
		for _, u := range units {
			if top >= u.size {
				return u.size, " " + u.name
			}
		}
		return 1, " B"
	case UnitSeconds:
		switch {
		case top >= 1:
			return 1, " s"
		case top >= 1e-3:
			return 1e-3, " ms"
		}
		return 1e-6, " µs"
	case UnitFraction:
		return 0.01, "%"
	}
	return 1, ""
}

// scaledLabel writes v (already divided by the unit) with decimals
// places and the suffix; 0 is written bare, plain numbers of five digits
// or more with thousands separators.
func scaledLabel(v float64, decimals int, unit, suffix string) string {
	if v == 0 {
		return "0"
	}
	if unit == "" && decimals == 0 && math.Abs(v) >= 10000 && math.Abs(v) < 1e18 {
		return groupThousands(int64(v))
	}
	return strconv.FormatFloat(v, 'f', decimals, 64) + suffix
}

// valueLabel writes one value in its unit, compactly: "4 GiB", "512 MiB",
// "250 ms", "37%", "65,536", "0.25".
func valueLabel(v float64, unit string) string {
	div, suffix := unitOf(unit, math.Abs(v))
	x := v / div
	s := strconv.FormatFloat(x, 'g', 3, 64)
	if strings.ContainsAny(s, "e") || (unit == "" && math.Abs(x) >= 1000) {
		if math.Abs(x) < 1e18 {
			return groupThousands(int64(math.Round(x))) + suffix
		}
		return strconv.FormatFloat(x, 'g', 3, 64) + suffix
	}
	return s + suffix
}

// pointValue writes a point's value for its tooltip: bytes as memsh
// prints them ("8.82 GiB"), others as on the axis.
func pointValue(v float64, unit string) string {
	if unit == UnitBytes && math.Abs(v) < 1e18 {
		return units.FormatBytes(int64(v))
	}
	if unit == "" && v == math.Trunc(v) && math.Abs(v) < 1e18 {
		return groupThousands(int64(v))
	}
	return valueLabel(v, unit)
}

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
