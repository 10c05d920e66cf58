package main

import (
	"runtime/debug"
	"testing"
)

// TestSetGCPercent: memsh paces its collector at gcPercent unless GOGC
// is set, which the runtime has read already and memsh leaves alone.
func TestSetGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	for _, c := range []struct {
		gogc string
		want int
	}{
		{"", gcPercent},
		{"100", 100},
		{"50", 100}, // the runtime read GOGC at start; setGCPercent changes nothing
		{"off", 100},
	} {
		debug.SetGCPercent(100)
		setGCPercent(func(k string) string {
			if k == "GOGC" {
				return c.gogc
			}
			return ""
		})
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("GOGC=%q: the collector's percent is %d, want %d", c.gogc, got, c.want)
		}
	}
}
