package plot

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// sweepChart is peak memory against batch for two checkpoint modes: the
// batch axis is logarithmic (1 to 8, powers of two), the memory axis runs
// from 0 to 40 GiB (35 GiB / 6 = 5.8 per tick -> 10 GiB steps).
//
// x pixels: the axis spans 96..920 (padLeft+12 .. Width-padRight-12),
// 824 px for log2(8√2 / (1/√2)) = 4 powers, 206 px a power, and batch 1
// half a power in: 1 -> 199, 2 -> 405, 4 -> 611, 8 -> 817.
// y pixels: tableBot - (tableBot-tableTop) * v / 40 GiB = 440 - 8.9 v
// (v in GiB): 5 -> 395.5, 10 -> 351, 20 -> 262, 35 -> 128.5.
func sweepChart() *TableChart {
	const GiB = 1 << 30
	return &TableChart{
		X: Axis{Name: "batch"}, Y: Axis{Name: "peak_allocated", Unit: UnitBytes},
		By: "checkpoint", Fits: true, Pareto: true, Lines: true,
		Series: []Series{
			{Name: "none", Points: []TablePoint{
				{X: 1, Y: 10 * GiB, Keys: []string{"seq=1024"}},
				{X: 2, Y: 20 * GiB, Keys: []string{"seq=1024"}},
				{X: 4, Y: 35 * GiB, DoesNotFit: true, Keys: []string{"seq=1024"}},
			}},
			{Name: "full", Points: []TablePoint{
				{X: 1, Y: 5 * GiB, Front: true, Keys: []string{"seq=1024"}},
				{X: 2, Y: 10 * GiB, Keys: []string{"seq=2048"}},
				{X: 8, Y: 20 * GiB, Front: true, Keys: []string{"seq=4096"}},
			}},
		},
		Skipped: 2,
	}
}

func TestTableChartSVG(t *testing.T) {
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Title: "sweep of batch (4) x checkpoint (2)", Table: sweepChart()}}))
	els := parseSVG(t, b.Bytes())
	texts := func(class string) string {
		var out []string
		for _, e := range byClass(els, class) {
			out = append(out, e.text)
		}
		return strings.Join(out, " | ")
	}
	for _, tc := range []struct{ class, want string }{
		{"title", "sweep of batch (4) x checkpoint (2)"},
		{"summary", "peak_allocated against batch: 6 rows in 2 series by checkpoint · 1 does not fit · 2 rows without a value not drawn | Pareto front: 2 rows (lower batch, lower peak_allocated)"},
		{"x-tick", "1 | 2 | 4 | 8"},
		{"y-tick", "0 | 10 GiB | 20 GiB | 30 GiB | 40 GiB"},
		{"x-label", "batch (log scale)"},
		{"y-label", "peak_allocated"},
		{"legend", "checkpoint: | none | full | fits | does not fit | Pareto front"},
		// Only seq differs between the front points.
		{"front-label", "seq=1024 | seq=4096"},
	} {
		if got := texts(tc.class); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.class, got, tc.want)
		}
	}

	// Dots at hand-computed positions, in series order; the point that
	// does not fit is a cross centred on its position.
	var dots []string
	for _, e := range byClass(els, "point") {
		dots = append(dots, e.attrs["cx"]+","+e.attrs["cy"]+" "+e.attrs["fill"])
	}
	want := "199.0,351.0 #4477AA 405.0,262.0 #4477AA 199.0,395.5 #EE6677 405.0,351.0 #EE6677 817.0,262.0 #EE6677"
	if got := strings.Join(dots, " "); got != want {
		t.Errorf("dots:\n got %s\nwant %s", got, want)
	}
	crosses := byClass(els, "point-nofit")
	// The first of two series draws the larger markers (radius 6).
	if len(crosses) != 1 || !strings.HasPrefix(crosses[0].attrs["d"], "M605.0 122.5l12.0 12.0") || crosses[0].attrs["stroke"] != "#4477AA" {
		t.Errorf("crosses: %+v, want one at (611, 128.5) in the first series' colour", crosses)
	}
	// Its tooltip is the <title> inside it, the next element.
	for i, e := range els {
		if e.attrs["class"] == "point-nofit" {
			if got := els[i+1]; got.name != "title" || got.text != "seq=1024, checkpoint=none, batch 4, peak_allocated 35.00 GiB, does not fit" {
				t.Errorf("tooltip of the cross: <%s>%q", got.name, got.text)
			}
		}
	}
	// One line per series, through its points in x order.
	var lines []string
	for _, e := range byClass(els, "series-line") {
		lines = append(lines, e.attrs["data-series"]+": "+e.attrs["d"])
	}
	if got, want := strings.Join(lines, "; "), "none: M199.0 351.0L405.0 262.0L611.0 128.5; full: M199.0 395.5L405.0 351.0L817.0 262.0"; got != want {
		t.Errorf("series lines:\n got %s\nwant %s", got, want)
	}
	// The front: two rings and the line joining them.
	var rings []string
	for _, e := range byClass(els, "front-ring") {
		rings = append(rings, e.attrs["cx"]+","+e.attrs["cy"])
	}
	if got := strings.Join(rings, " "); got != "199.0,395.5 817.0,262.0" {
		t.Errorf("front rings at %s", got)
	}
	if fl := byClass(els, "front-line"); len(fl) != 1 || fl[0].attrs["d"] != "M199.0 395.5L817.0 262.0" {
		t.Errorf("front line: %+v", fl)
	}
	// Grid lines at the y ticks: 10 GiB at 351.
	found := false
	for _, e := range byClass(els, "grid") {
		if e.attrs["y1"] == "351.0" && e.attrs["y2"] == "351.0" {
			found = true
		}
	}
	if !found {
		t.Error("no grid line at 10 GiB (y=351)")
	}
}

func TestTableChartOptions(t *testing.T) {
	tc := sweepChart()
	tc.Lines, tc.Pareto, tc.Fits, tc.By = false, false, false, ""
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Table: tc}}))
	els := parseSVG(t, b.Bytes())
	for _, class := range []string{"series-line", "front-line", "front-ring", "front-label"} {
		if n := len(byClass(els, class)); n != 0 {
			t.Errorf("%d elements of class %s, want none", n, class)
		}
	}
	if got := byClass(els, "title")[0].text; got != "peak_allocated against batch" {
		t.Errorf("default title %q", got)
	}
	if got := byClass(els, "summary")[0].text; got != "peak_allocated against batch: 6 rows · 2 rows without a value not drawn" {
		t.Errorf("summary %q", got)
	}
	if n := len(byClass(els, "legend")); n != 0 {
		t.Errorf("legend with %d entries for one series without fits or front", n)
	}
}

func TestTableChartErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chart *TableChart
		err   string
	}{
		{"no points", &TableChart{X: Axis{Name: "tp"}, Y: Axis{Name: "mfu"}, Skipped: 3}, `chart "t" has no points: no row has numbers in both tp and mfu`},
		{"not finite", &TableChart{X: Axis{Name: "tp"}, Y: Axis{Name: "mfu"}, Series: []Series{{Points: []TablePoint{{X: 1, Y: posInf()}}}}}, `chart "t": a point is not a finite number (1, +Inf)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteSVG(&bytes.Buffer{}, []Chart{{Title: "t", Table: tc.chart}})
			if err == nil || err.Error() != tc.err {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func posInf() float64 {
	var zero float64
	return 1 / zero
}

// TestTableAndTimelineStack puts a table chart and a timeline in one
// document and one page.
func TestTableAndTimelineStack(t *testing.T) {
	r := quickstartReport(t, "RTX-4090", 4)
	charts := []Chart{{Title: "sweep", Table: sweepChart()}, {Title: "timeline", Report: r}}
	var b bytes.Buffer
	must(t, WriteSVG(&b, charts))
	els := parseSVG(t, b.Bytes())
	if got := els[0].attrs["height"]; got != fmt.Sprint(3*Height) { // the report's time by module too
		t.Errorf("height %s, want %d", got, 3*Height)
	}
	if len(byClass(els, "point")) != 5 || len(byClass(els, "area")) == 0 {
		t.Error("want the table's points and the timeline's areas")
	}
	if !strings.HasPrefix(els[1].text, "chart: sweep (and 1 more)") {
		t.Errorf("document title %q", els[1].text)
	}
	var page bytes.Buffer
	must(t, WriteHTML(&page, "memsh: s.star", []Section{{Chart: &charts[0], Table: "batch  peak\n1  5 GiB\n"}, {Chart: &charts[1]}}))
	html := page.String()
	if strings.Count(html, "<svg xmlns=") != 2 || !strings.Contains(html, "<pre>batch  peak\n1  5 GiB</pre>") || !strings.Contains(html, `class="front-ring"`) {
		t.Errorf("page lacks the two charts or the table:\n%.600s", html)
	}
}

// Two series with the same points stay visible (issue 24 item 11): the
// second draws smaller markers over the first, and a dashed line.
func TestTableChartCoincidentSeries(t *testing.T) {
	pts := []TablePoint{{X: 1, Y: 10}, {X: 2, Y: 20}}
	tc := &TableChart{X: Axis{Name: "batch"}, Y: Axis{Name: "step_time", Unit: "seconds"}, By: "members_mode", Lines: true,
		Series: []Series{{Name: "stacked", Points: pts}, {Name: "sequential", Points: pts}}}
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Table: tc}}))
	els := parseSVG(t, b.Bytes())
	radius := map[string]string{}
	for _, e := range byClass(els, "point") {
		radius[e.attrs["fill"]] = e.attrs["r"]
	}
	if len(radius) != 2 || radius["#4477AA"] <= radius["#EE6677"] {
		t.Errorf("marker radii by series colour: %v; want the second series' smaller", radius)
	}
	lines := byClass(els, "series-line")
	if len(lines) != 2 || lines[0].attrs["stroke-dasharray"] != "" || lines[1].attrs["stroke-dasharray"] == "" {
		t.Errorf("series lines: %+v; want the first solid, the second dashed", lines)
	}
}
