package plot

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// TableChart is a chart of two numeric columns of a table (a sweep or a
// search): one point per row, in series by the value of a third column.
// The caller builds it from the table; plot only draws.
type TableChart struct {
	X, Y Axis
	// By names the column that splits the rows into Series ("" for one
	// series).
	By     string
	Series []Series
	// Fits says the table has a fits column: points that do not fit are
	// drawn as crosses, and the legend says so.
	Fits bool
	// Pareto says the front was asked for: points with Front set are
	// ringed, joined and labelled.
	Pareto bool
	// Lines joins each series' points in x order (when no two share an
	// x): for an x the rows were swept over, not for a scatter of two
	// figures.
	Lines bool
	// Skipped counts rows with no number in X or Y (a plan the sweep
	// rejected); they are not drawn.
	Skipped int
}

// Axis is the column on one axis.
type Axis struct {
	Name string
	Unit string // UnitBytes, UnitSeconds, UnitFraction, or "" for a plain number
	// Higher says higher values are better (mfu, tokens_per_s), for the
	// description of the Pareto front.
	Higher bool
}

// Series is the points drawn in one colour.
type Series struct {
	Name   string // the By column's value ("full"); "" with no By
	Points []TablePoint
}

// TablePoint is one row of the table.
type TablePoint struct {
	X, Y       float64
	DoesNotFit bool // the row's fits is False
	Front      bool // on the Pareto front of the chart's axes
	// Keys name the row beyond x, y and By, one "column=value" per key
	// column of the table, the same columns for every point: "tp=2",
	// "pp=4". All are in the tooltip; a front point's label shows those
	// that differ between front points.
	Keys []string
}

// Table chart geometry, in pixels, within a Width x Height panel.
const (
	tableTop       = 84  // the plot area, below the title and two summary lines
	tableBot       = 440 // above the x ticks, the x label and the legend
	maxFrontLabels = 12  // front points labelled beside them; more crowd the chart
)

// seriesColors is Paul Tol's "bright" scheme (distinguishable with common
// colour-vision deficiencies); series past the seventh reuse it.
var seriesColors = []string{"#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#BBBBBB"}

const colorFront = "#EE7733"

// tablePanel draws one table chart in a Width x Height box at the origin.
func tablePanel(s *svgWriter, title string, tc *TableChart) error {
	var xs, ys []float64
	points := 0
	for _, se := range tc.Series {
		for _, p := range se.Points {
			if !finite(p.X) || !finite(p.Y) {
				return fmt.Errorf("chart %q: a point is not a finite number (%v, %v)", title, p.X, p.Y)
			}
			xs, ys = append(xs, p.X), append(ys, p.Y)
			points++
		}
	}
	if points == 0 {
		return fmt.Errorf("chart %q has no points: no row has numbers in both %s and %s", title, tc.X.Name, tc.Y.Name)
	}
	left, right := float64(padLeft), float64(Width-padRight)
	sx := newScale(xs, tc.X.Unit, left+12, right-12)
	sy := newScale(ys, tc.Y.Unit, tableBot, tableTop)

	s.rect(0, 0, Width, Height, "#FFFFFF", ` class="background"`)
	if title == "" {
		title = tc.Y.Name + " against " + tc.X.Name
	}
	room := float64(Width - 2*16)
	s.raw(`<text x="16" y="26" font-size="16" font-weight="bold" fill="#000000" class="title">%s</text>`+"\n", esc(fit(title, room, 16)))
	for i, line := range wrap(summary(tc, points), room, 12, 2) {
		s.text(16, 46+16*float64(i), 12, "start", "#000000", "summary", line)
	}

	tableAxes(s, tc, sx, sy, left, right)
	front := frontPoints(tc)
	if tc.Pareto && len(front) > 1 {
		s.raw(`<path d="%s" fill="none" stroke="%s" stroke-width="7" stroke-opacity="0.35" stroke-linejoin="round" stroke-linecap="round" class="front-line"/>`+"\n", polyline(front, sx, sy), colorFront)
	}
	if tc.Lines {
		for k, se := range tc.Series {
			seriesLine(s, se, seriesColors[k%len(seriesColors)], seriesDash(k), sx, sy)
		}
	}
	if tc.Pareto && len(front) <= maxFrontLabels {
		frontLabels(s, tc, front, sx, sy, left, right)
	}
	for k, se := range tc.Series {
		color := seriesColors[k%len(seriesColors)]
		for _, p := range se.Points {
			point(s, tc, se, p, color, seriesRadius(k, len(tc.Series)), sx, sy)
		}
	}
	if tc.Pareto {
		for _, p := range front {
			s.raw(`<circle cx="%.1f" cy="%.1f" r="8" fill="none" stroke="%s" stroke-width="2" class="front-ring"/>`+"\n", sx.at(p.X), sy.at(p.Y), colorFront)
		}
	}
	tableLegend(s, tc, left, right)
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// wrap breaks parts, joined by " · ", into at most n lines of about width
// pixels at font size px, breaking between parts; the last line is
// shortened to fit.
func wrap(parts []string, width, px float64, n int) []string {
	var lines []string
	for _, p := range parts {
		k := len(lines) - 1
		if k >= 0 && (0.58*px*float64(len([]rune(lines[k]+" · "+p))) <= width || len(lines) == n) {
			lines[k] += " · " + p
			continue
		}
		lines = append(lines, p)
	}
	for i := range lines {
		lines[i] = fit(lines[i], width, px)
	}
	return lines
}

// summary is the text under the title, in parts: what is drawn, what
// does not fit, what is left out, and what the front is.
func summary(tc *TableChart, points int) []string {
	parts := []string{fmt.Sprintf("%s against %s: %d %s", tc.Y.Name, tc.X.Name, points, plural(points, "row", "rows"))}
	if tc.By != "" {
		parts[0] += fmt.Sprintf(" in %d %s by %s", len(tc.Series), plural(len(tc.Series), "series", "series"), tc.By)
	}
	if tc.Fits {
		n := 0
		for _, se := range tc.Series {
			for _, p := range se.Points {
				if p.DoesNotFit {
					n++
				}
			}
		}
		if n == 0 {
			parts = append(parts, "all fit")
		} else {
			parts = append(parts, fmt.Sprintf("%d %s not fit", n, plural(n, "does", "do")))
		}
	}
	if tc.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d %s without a value not drawn", tc.Skipped, plural(tc.Skipped, "row", "rows")))
	}
	if tc.Pareto {
		n := len(frontPoints(tc))
		parts = append(parts, fmt.Sprintf("Pareto front: %d %s (%s %s, %s %s)", n, plural(n, "row", "rows"),
			better(tc.X), tc.X.Name, better(tc.Y), tc.Y.Name))
	}
	return parts
}

func better(a Axis) string {
	if a.Higher {
		return "higher"
	}
	return "lower"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// frontPoints are the points on the front, in x order (then y).
func frontPoints(tc *TableChart) []TablePoint {
	var out []TablePoint
	for _, se := range tc.Series {
		for _, p := range se.Points {
			if p.Front {
				out = append(out, p)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].X != out[j].X {
			return out[i].X < out[j].X
		}
		return out[i].Y < out[j].Y
	})
	return out
}

// tableAxes draws the grid, the ticks and the axis names.
func tableAxes(s *svgWriter, tc *TableChart, sx, sy scale, left, right float64) {
	for _, t := range sy.ticks {
		y := sy.at(t.v)
		grid := "#E5E5E5"
		if t.v == 0 && !sy.log {
			grid = "#999999" // the zero line of an axis with negative values
		}
		if y < tableBot-0.5 {
			s.line(left, y, right, y, grid, ` class="grid"`)
		}
		s.text(left-6, y+4, 11, "end", "#333333", "y-tick", t.label)
	}
	for _, t := range sx.ticks {
		x := sx.at(t.v)
		s.line(x, tableTop, x, tableBot, "#F0F0F0", ` class="grid"`)
		s.line(x, tableBot, x, tableBot+4, "#333333", ` class="x-tick-mark"`)
		s.text(x, tableBot+17, 11, "middle", "#333333", "x-tick", t.label)
	}
	s.line(left, tableTop, left, tableBot, "#333333", ` class="axis"`)
	s.line(left, tableBot, right, tableBot, "#333333", ` class="axis"`)
	xlabel := tc.X.Name
	if sx.log {
		xlabel += " (log scale)"
	}
	s.text((left+right)/2, tableBot+36, 12, "middle", "#333333", "x-label", xlabel)
	ylabel := tc.Y.Name
	if sy.log {
		ylabel += " (log scale)"
	}
	s.raw(`<text transform="translate(18,%.1f) rotate(-90)" font-size="12" text-anchor="middle" fill="#333333" class="y-label">%s</text>`+"\n", (tableTop+tableBot)/2.0, esc(ylabel))
}

// Series that coincide (two settings that give the same figures) must
// stay visible: each series is drawn over the ones before it with smaller
// markers, so that coinciding points show as concentric rings, and
// dashed lines, so that coinciding lines alternate colours.

// seriesRadius is the marker radius of series k of n.
func seriesRadius(k, n int) float64 {
	if n <= 1 {
		return 4.5
	}
	return max(6-1.1*float64(k), 2.2)
}

// seriesDash is the stroke-dasharray of series k's line ("" solid).
func seriesDash(k int) string {
	return []string{"", "7 4", "2 3", "10 3 2 3"}[k%4]
}

// seriesLine joins a series' points in x order when no two share an x.
func seriesLine(s *svgWriter, se Series, color, dash string, sx, sy scale) {
	if len(se.Points) < 2 {
		return
	}
	pts := append([]TablePoint(nil), se.Points...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
	for i := 1; i < len(pts); i++ {
		if pts[i].X == pts[i-1].X {
			return
		}
	}
	dashes := ""
	if dash != "" {
		dashes = ` stroke-dasharray="` + dash + `"`
	}
	s.raw(`<path d="%s" fill="none" stroke="%s" stroke-width="1.5"%s class="series-line" data-series="%s"/>`+"\n", polyline(pts, sx, sy), color, dashes, esc(se.Name))
}

// polyline is the SVG path data through the points in order.
func polyline(pts []TablePoint, sx, sy scale) string {
	var d strings.Builder
	for i, p := range pts {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%.1f %.1f", cmd, sx.at(p.X), sy.at(p.Y))
	}
	return d.String()
}

// point draws one row: a dot, or a cross when it does not fit, with a
// tooltip naming the row and its values.
func point(s *svgWriter, tc *TableChart, se Series, p TablePoint, color string, r float64, sx, sy scale) {
	x, y := sx.at(p.X), sy.at(p.Y)
	tip := append([]string(nil), p.Keys...)
	if tc.By != "" {
		tip = append(tip, tc.By+"="+se.Name)
	}
	tip = append(tip, tc.X.Name+" "+pointValue(p.X, tc.X.Unit), tc.Y.Name+" "+pointValue(p.Y, tc.Y.Unit))
	if tc.Fits {
		if p.DoesNotFit {
			tip = append(tip, "does not fit")
		} else {
			tip = append(tip, "fits")
		}
	}
	title := "<title>" + esc(strings.Join(tip, ", ")) + "</title>"
	if p.DoesNotFit {
		s.raw(`<path d="M%.1f %.1fl%.1f %.1fm0 %.1fl%.1f %.1f" stroke="%s" stroke-width="2.2" fill="none" class="point-nofit" data-x="%g" data-y="%g">%s</path>`+"\n",
			x-r, y-r, 2*r, 2*r, -2*r, -2*r, 2*r, color, p.X, p.Y, title)
		return
	}
	s.raw(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" stroke="#FFFFFF" stroke-width="1" class="point" data-x="%g" data-y="%g">%s</circle>`+"\n",
		x, y, r, color, p.X, p.Y, title)
}

// frontLabels writes beside each front point the keys that differ
// between front points ("pp=8, cp=4"), at the first of four places
// (right above, right below, left above, left below) that stays in the
// plot area and clear of the labels already placed and of the other
// points (else of the labels only: the points are drawn over the
// labels); a label with no such place is left to the tooltip.
func frontLabels(s *svgWriter, tc *TableChart, front []TablePoint, sx, sy scale, left, right float64) {
	const px = 10.5
	var differ []int
	for k := range front[0].Keys {
		for _, p := range front[1:] {
			if k < len(p.Keys) && p.Keys[k] != front[0].Keys[k] {
				differ = append(differ, k)
				break
			}
		}
	}
	var dots []box
	for _, se := range tc.Series {
		for _, p := range se.Points {
			x, y := sx.at(p.X), sy.at(p.Y)
			dots = append(dots, box{x - 5, y - 5, x + 5, y + 5})
		}
	}
	var placed []box
	for _, p := range front {
		var parts []string
		for _, k := range differ {
			if k < len(p.Keys) {
				parts = append(parts, p.Keys[k])
			}
		}
		text := strings.Join(parts, ", ")
		if text == "" {
			continue
		}
		x, y := sx.at(p.X), sy.at(p.Y)
		type place struct {
			x, y   float64
			anchor string
			text   string
			b      box
		}
		var places []place
		for _, at := range []struct {
			anchor string
			dx, dy float64
		}{{"start", 11, -9}, {"start", 11, 17}, {"end", -11, -9}, {"end", -11, 17}} {
			room := right - (x + at.dx)
			if at.anchor == "end" {
				room = x + at.dx - left
			}
			if int(room/(0.58*px)) < min(len([]rune(text)), 8) {
				continue // no room for the label or its first 8 characters
			}
			t := fit(text, room, px)
			w := 0.58 * px * float64(len([]rune(t)))
			b := box{x + at.dx, y + at.dy - px, x + at.dx + w, y + at.dy + 3}
			if at.anchor == "end" {
				b.x0, b.x1 = x+at.dx-w, x+at.dx
			}
			if b.y0 >= tableTop && b.y1 <= tableBot && !b.hitsAny(placed) {
				places = append(places, place{x + at.dx, y + at.dy, at.anchor, t, b})
			}
		}
		if len(places) == 0 {
			continue
		}
		best := places[0]
		for _, pl := range places {
			if !pl.b.hitsAny(dots) {
				best = pl
				break
			}
		}
		placed = append(placed, best.b)
		// A white outline under the glyphs keeps them legible over lines.
		s.raw(`<text x="%.1f" y="%.1f" font-size="%g" text-anchor="%s" fill="#222222" stroke="#FFFFFF" stroke-width="3" stroke-linejoin="round" paint-order="stroke" class="front-label">%s</text>`+"\n",
			best.x, best.y, px, best.anchor, esc(best.text))
	}
}

// box is a rectangle of the chart, in pixels.
type box struct{ x0, y0, x1, y1 float64 }

func (b box) hitsAny(others []box) bool {
	for _, o := range others {
		if b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1 {
			return true
		}
	}
	return false
}

// tableLegend names the series, the markers and the front, on one or two
// lines under the x label.
func tableLegend(s *svgWriter, tc *TableChart, left, right float64) {
	x, y := left, float64(tableBot+62)
	room := func(w float64) {
		if x+w > right && x > left {
			x, y = left, y+18
		}
	}
	item := func(swatch, label string) {
		w := 18 + 0.58*11*float64(len([]rune(label))) + 16
		room(w)
		s.raw(swatch, x+6, y)
		s.text(x+16, y+4, 11, "start", "#333333", "legend", label)
		x += w
	}
	if tc.By != "" {
		head := tc.By + ":"
		room(0.58*11*float64(len([]rune(head))) + 60)
		s.text(x, y+4, 11, "start", "#333333", "legend", head)
		x += 0.58*11*float64(len([]rune(head))) + 10
		for k, se := range tc.Series {
			color := seriesColors[k%len(seriesColors)]
			swatch := fmt.Sprintf(`<circle cx="%%.1f" cy="%%.1f" r="%.1f" fill="%s" class="legend-swatch"/>`+"\n", seriesRadius(k, len(tc.Series)), color)
			if tc.Lines {
				swatch = fmt.Sprintf(`<g class="legend-swatch"><path d="M%%[1]g %%[2]gm-7 0h14" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+
					`<circle cx="%%[1]g" cy="%%[2]g" r="%.1f" fill="%s"/></g>`+"\n", color, seriesDash(k), seriesRadius(k, len(tc.Series)), color)
			}
			item(swatch, se.Name)
		}
		x += 12
	}
	if tc.Fits {
		item(`<circle cx="%.1f" cy="%.1f" r="4.5" fill="#555555"/>`+"\n", "fits")
		item(`<path d="M%.1f %.1fm-4.5 -4.5l9 9m0 -9l-9 9" stroke="#555555" stroke-width="2.2"/>`+"\n", "does not fit")
	}
	if tc.Pareto {
		item(`<circle cx="%.1f" cy="%.1f" r="7" fill="none" stroke="`+colorFront+`" stroke-width="2"/>`+"\n", "Pareto front")
	}
}
