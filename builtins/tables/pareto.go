package tables

import (
	"math"
	"sort"

	"go.starlark.net/starlark"
)

// paretoIndexes returns the indexes of the rows on the Pareto front of
// columns jx and jy, in order of x (best first): the rows no other row
// beats or equals in both, lower being better unless upX or upY says
// higher. Rows without a number in either column are not considered.
func ParetoIndexes(rows [][]starlark.Value, jx, jy int, upX, upY bool) []int {
	type pt struct {
		x, y float64
		i    int
	}
	var pts []pt
	for i, r := range rows {
		x, okx := number(r[jx])
		y, oky := number(r[jy])
		if !okx || !oky {
			continue
		}
		if upX {
			x = -x
		}
		if upY {
			y = -y
		}
		pts = append(pts, pt{x, y, i})
	}
	// Sort by x (then y); a point is on the front when its y beats every
	// point before it.
	sort.SliceStable(pts, func(a, c int) bool {
		if pts[a].x != pts[c].x {
			return pts[a].x < pts[c].x
		}
		return pts[a].y < pts[c].y
	})
	var out []int
	bestY := math.Inf(1)
	for _, p := range pts {
		if p.y < bestY {
			out = append(out, p.i)
			bestY = p.y
		}
	}
	return out
}
