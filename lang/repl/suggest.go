package repl

import (
	"sort"

	"github.com/memsh/memsh/sim/units"
)

// nearest returns the names within a small edit distance of name (a typo),
// closest first, at most three.
func nearest(name string, names []string) []string {
	type scored struct {
		name string
		d    int
	}
	limit := 2
	if len(name) <= 3 {
		limit = 1
	}
	var hits []scored
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if d := units.EditDistance(name, n); d <= limit {
			hits = append(hits, scored{n, d})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].d != hits[j].d {
			return hits[i].d < hits[j].d
		}
		return hits[i].name < hits[j].name
	})
	var out []string
	for i := 0; i < len(hits) && i < 3; i++ {
		out = append(out, hits[i].name)
	}
	return out
}
