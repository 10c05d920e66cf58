package search

import (
	"sort"

	"github.com/memsh/memsh/sim/units"
)

// reasonOf is the reason class of a plan's refusal: its message with
// every number written N, so that the refusals of one rule count
// together.
func reasonOf(err error) string {
	var msg string
	if e, ok := err.(*units.Error); ok {
		msg = e.Msg // its message alone: Error() would format path and hint too, for nothing
	} else {
		msg = err.Error()
	}
	var room [256]byte // the class is written here (on the stack) when it fits: one allocation, the string, per refused layout
	b := room[:0]
	for i := 0; i < len(msg); {
		j := i // the text up to the next number, copied whole
		for j < len(msg) && !isDigit(msg[j]) {
			j++
		}
		b = append(b, msg[i:j]...)
		if j == len(msg) {
			break
		}
		b = append(b, 'N')
		for j < len(msg) && isDigit(msg[j]) {
			j++
		}
		i = j
	}
	return string(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Reason is one class of refused layouts and how many there were.
type Reason struct {
	Why   string
	Count int
}

// sortedReasons lists counts by reason, most first.
func sortedReasons(counts map[string]int) []Reason {
	out := make([]Reason, 0, len(counts))
	for why, n := range counts {
		out = append(out, Reason{why, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Why < out[j].Why
	})
	return out
}
