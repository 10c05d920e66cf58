package plot

import (
	"strings"

	"github.com/memsh/memsh/sim/replay"
)

// sparkLevels are the eight block heights of a sparkline, lowest first.
var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws allocated memory over the step in at most width
// characters, each the highest point of the events it covers, scaled so
// that █ is the peak. The second string names the major phases (setup,
// forward, backward with its recomputation, optimizer) under the columns
// where each begins, where there is room. Both are "" for an empty
// timeline.
func Sparkline(tl []replay.Point, width int) (spark, phases string) {
	cols := columns(tl, width)
	if len(cols) == 0 {
		return "", ""
	}
	var peak int64
	for _, c := range cols {
		peak = max(peak, c.pt.Allocated)
	}
	var b strings.Builder
	for _, c := range cols {
		b.WriteRune(sparkLevel(c.pt.Allocated, peak))
	}
	return b.String(), phaseLine(cols)
}

// sparkLevel is the block for v on a scale whose top is peak: the level
// is v/peak in eighths, rounded up, so any memory shows as at least ▁.
func sparkLevel(v, peak int64) rune {
	if peak <= 0 || v <= 0 {
		return ' '
	}
	level := int((v*8 + peak - 1) / peak)
	return sparkLevels[min(max(level, 1), 8)-1]
}

// phaseLine writes each major phase's name from the column where it
// begins, cut to the run's width less one (a gap before the next name).
func phaseLine(cols []column) string {
	line := []rune(strings.Repeat(" ", len(cols)))
	for _, run := range phaseRuns(cols, majorPhase) {
		name := []rune(run.phase.String())
		room := run.end - run.first - 1
		if run.end == len(cols) {
			room++
		}
		if room < 1 {
			continue
		}
		if len(name) > room {
			name = name[:room]
		}
		copy(line[run.first:], name)
	}
	return strings.TrimRight(string(line), " ")
}
