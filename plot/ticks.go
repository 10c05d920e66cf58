package plot

import "fmt"

// byteTicks chooses the step of the y axis for values up to top: the
// smallest of 1, 2 or 5 times ten to a power of a binary unit (B, KiB,
// MiB, GiB, TiB) that gives at most maxTicks steps. Labels read as whole
// numbers of that unit ("20 GiB", "500 MiB").
func byteTicks(top int64, maxTicks int) (step int64, unit int64, unitName string) {
	units := []struct {
		size int64
		name string
	}{{1, "B"}, {1 << 10, "KiB"}, {1 << 20, "MiB"}, {1 << 30, "GiB"}, {1 << 40, "TiB"}}
	for _, u := range units {
		for _, m := range []int64{1, 2, 5, 10, 20, 50, 100, 200, 500} {
			s := m * u.size
			if top/s < int64(maxTicks) {
				return s, u.size, u.name
			}
		}
	}
	last := units[len(units)-1]
	return (top/int64(maxTicks) + 1), last.size, last.name
}

// tickLabel writes v (a multiple of the tick step) in the tick unit.
func tickLabel(v, unit int64, name string) string {
	if v == 0 {
		return "0"
	}
	if v%unit == 0 {
		return fmt.Sprintf("%d %s", v/unit, name)
	}
	return fmt.Sprintf("%.1f %s", float64(v)/float64(unit), name)
}
