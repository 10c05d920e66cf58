package plot

import (
	"fmt"
	"sort"

	"github.com/memsh/memsh/sim/replay"
)

// The time of a step by module (replay.TimeEstimate.Modules, r.modules):
// one horizontal bar per row, slowest first, split into forward,
// backward, recompute and launch time for a module; one segment for a
// step term (exposed communication, bubble, optimizer, host transfers,
// step overhead). It is the second panel of a report that has a time
// model.

// modulesShown is the rows a panel has room for.
const modulesShown = 14

// Panel geometry of the bars.
const (
	barsTop    = 72
	barsLeft   = 300
	barsRight  = Width - 170
	barsHeight = 22
	barsGap    = 8
)

// moduleColor is the colour of a part of a module's bar, or of a term.
var moduleColor = map[string]string{
	"forward": phaseColor[replay.PhaseForward], "backward": phaseColor[replay.PhaseBackward],
	"recompute": phaseColor[replay.PhaseRecompute], "launch": "#BBBBBB",
	"comm": categoryColor["comm"], "bubble": "#DDDDDD", "optimizer": phaseColor[replay.PhaseOptimizer],
	"host": "#999999", "overhead": "#777777",
}

// hasModules reports whether a report gets a modules panel.
func hasModules(r *replay.Report) bool {
	return r != nil && r.Time.StepSeconds > 0 && len(r.Time.Modules) > 0
}

// modulesPanel draws the bars of r's modules in a Width x Height box.
func modulesPanel(s *svgWriter, title string, r *replay.Report) {
	rows := append([]replay.ModuleTime(nil), r.Time.Modules...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Seconds > rows[j].Seconds })
	more := len(rows) - modulesShown
	rows = rows[:min(len(rows), modulesShown)]
	step := r.Time.StepSeconds
	var top float64
	for _, m := range rows {
		top = max(top, m.Seconds)
	}
	s.rect(0, 0, Width, Height, "#FFFFFF", ` class="background"`)
	if title == "" {
		title = "one training step"
	}
	room := float64(Width - 2*16)
	s.raw(`<text x="16" y="26" font-size="16" font-weight="bold" fill="#000000" class="modules-title">%s</text>`+"\n", esc(fit("time by module · "+title, room, 16)))
	summary := fmt.Sprintf("step %s, MFU %.1f%% · the rows add up to the step (r.modules)", seconds(step), 100*r.Time.MFU)
	if more > 0 {
		summary += fmt.Sprintf(" · %d shorter rows not drawn", more)
	}
	s.text(16, 48, 12, "start", "#333333", "summary", summary)
	width := float64(barsRight - barsLeft)
	for i, m := range rows {
		y := float64(barsTop + i*(barsHeight+barsGap))
		label := m.Name
		if m.Count > 1 {
			label = fmt.Sprintf("%s ×%d", m.Name, m.Count)
		}
		s.text(barsLeft-8, y+barsHeight*0.7, 12, "end", "#000000", "module-name", fit(label, barsLeft-24, 12))
		x := float64(barsLeft)
		parts := []struct {
			name string
			sec  float64
		}{{"forward", m.Forward}, {"backward", m.Backward}, {"recompute", m.Recompute}, {"launch", m.Launch}}
		if m.Count == 0 {
			parts = parts[:1]
			parts[0].name, parts[0].sec = m.Bound, m.Seconds
		}
		for _, p := range parts {
			if p.sec <= 0 || top <= 0 {
				continue
			}
			w := width * p.sec / top
			fill := moduleColor[p.name]
			if fill == "" {
				fill = "#999999"
			}
			s.raw(`<rect x="%.2f" y="%.2f" width="%.2f" height="%d" fill="%s" class="module-bar"><title>%s</title></rect>`+"\n",
				x, y, w, barsHeight, fill, esc(fmt.Sprintf("%s: %s %s", m.Name, p.name, seconds(p.sec))))
			x += w
		}
		s.text(x+6, y+barsHeight*0.7, 12, "start", "#333333", "module-value",
			fmt.Sprintf("%s · %.1f%% · %s", seconds(m.Seconds), 100*m.Seconds/step, m.Bound))
	}
	y := float64(Height - 24)
	x := 16.0
	for _, n := range []string{"forward", "backward", "recompute", "launch", "comm", "bubble", "optimizer"} {
		s.rect(x, y-10, 12, 12, moduleColor[n], ` class="legend-swatch"`)
		s.text(x+16, y, 12, "start", "#333333", "legend", n)
		x += 24 + 8*float64(len(n))
	}
}

// seconds writes a duration with three significant figures.
func seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}
