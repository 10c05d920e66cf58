package host

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// didYouMean returns a hint naming the known name closest to name (at most
// two edits apart once case and _/- are ignored), or "".
func DidYouMean(name string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	n := norm(name)
	best, bestD := "", 3
	for _, k := range known {
		if d := units.EditDistance(n, norm(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// withHint turns err into a *sim.Error carrying hint (when hint is not
// empty and err is not one already).
func WithHint(err error, hint string) error {
	if hint == "" {
		return err
	}
	if se, ok := err.(*units.Error); ok {
		c := *se
		if c.Hint == "" {
			c.Hint = hint
		}
		return &c
	}
	return &units.Error{Msg: err.Error(), Hint: hint}
}
