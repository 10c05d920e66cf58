package builtins

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim"
)

// didYouMean returns a hint naming the known name closest to name (at most
// two edits apart once case and _/- are ignored), or "".
func didYouMean(name string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	n := norm(name)
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(n, norm(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// withHint turns err into a *sim.Error carrying hint (when hint is not
// empty and err is not one already).
func withHint(err error, hint string) error {
	if hint == "" {
		return err
	}
	if se, ok := err.(*sim.Error); ok {
		c := *se
		if c.Hint == "" {
			c.Hint = hint
		}
		return &c
	}
	return &sim.Error{Msg: err.Error(), Hint: hint}
}
