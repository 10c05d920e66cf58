package live

import (
	_ "embed"
	"fmt"
	"html"
	"io"
	"strings"
)

// Page is one run of the script, as the browser shows it.
type Page struct {
	Title    string
	Sections []Section
	// Err is the script's error, shown instead of the sections (the page
	// stays up, and reloads when the script is saved again).
	Err string
}

// Section is one emitted report or table.
type Section struct {
	SVG string // the chart, an SVG document ("" for a table without a chart)
	// Text is a report's table as print() writes it.
	Text string
	// Table is a table's cells, each row clickable when Row is set.
	Table *Table
	// Alive lists the tensors alive after timeline event i of a report's
	// chart (nil: the chart is not a timeline).
	Alive func(event int) (Moment, error)
	// Row draws the timeline of a table's row i (nil: the rows hold no
	// reports).
	Row func(row int) (*RowChart, error)
}

// RowChart is a table row's timeline.
type RowChart struct {
	SVG   string
	Alive func(event int) (Moment, error)
}

// Table is a table's shown cells.
type Table struct {
	Title string
	Head  []string
	Rows  [][]string
	Right []bool // per column: numbers, aligned right
	Notes []string
}

// Moment is what is alive after one event of a timeline.
type Moment struct {
	Event     int      `json:"event"`
	Phase     string   `json:"phase"`
	Op        string   `json:"op"`
	Allocated int64    `json:"allocated"`
	Tensors   []Tensor `json:"tensors"` // largest first, at most MaxTensors
	More      int      `json:"more"`    // tensors left out
	MoreBytes int64    `json:"more_bytes"`
}

// Tensor is one live allocation.
type Tensor struct {
	Name   string `json:"name"`
	Op     string `json:"op"`
	Module string `json:"module"`
	Phase  string `json:"phase"`
	Bytes  int64  `json:"bytes"`
}

// MaxTensors is how many tensors a Moment lists.
const MaxTensors = 12

//go:embed page.js
var pageJS string

//go:embed page.css
var pageCSS string

// write renders the page; version is the build it shows (the script
// polls /version and reloads when it changes).
func (p *Page) write(w io.Writer, version int) error {
	var b strings.Builder
	title := html.EscapeString(p.Title)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s</style>\n</head>\n", title, pageCSS)
	fmt.Fprintf(&b, "<body data-version=\"%d\">\n<h1>%s</h1>\n<p class=\"hint\">Live: memsh re-runs the script when it is saved. Point at a timeline to see what is alive there; click a table row to draw its timeline.</p>\n", version, title)
	if p.Err != "" {
		fmt.Fprintf(&b, "<pre class=\"error\">%s</pre>\n", html.EscapeString(p.Err))
	}
	for i, s := range p.Sections {
		fmt.Fprintf(&b, "<section data-index=\"%d\"%s>\n", i, attrIf(s.Alive != nil, " data-alive"))
		b.WriteString(s.SVG)
		if s.Text != "" {
			fmt.Fprintf(&b, "<pre>%s</pre>\n", html.EscapeString(strings.TrimRight(s.Text, "\n")))
		}
		if s.Table != nil {
			writeTable(&b, s.Table, s.Row != nil)
			if s.Row != nil {
				b.WriteString("<div class=\"row-chart\"></div>\n")
			}
		}
		b.WriteString("</section>\n")
	}
	fmt.Fprintf(&b, "<div id=\"tip\" hidden></div>\n<script>\n%s</script>\n</body>\n</html>\n", pageJS)
	_, err := io.WriteString(w, b.String())
	return err
}

func attrIf(ok bool, attr string) string {
	if ok {
		return attr
	}
	return ""
}

func writeTable(b *strings.Builder, t *Table, clickable bool) {
	cls := "data"
	if clickable {
		cls += " clickable"
	}
	fmt.Fprintf(b, "<table class=\"%s\">\n", cls)
	if t.Title != "" {
		fmt.Fprintf(b, "<caption>%s</caption>\n", html.EscapeString(t.Title))
	}
	b.WriteString("<thead><tr>")
	for _, h := range t.Head {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(h))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for i, r := range t.Rows {
		fmt.Fprintf(b, "<tr data-row=\"%d\">", i)
		for k, c := range r {
			align := ""
			if k < len(t.Right) && t.Right[k] {
				align = " class=\"num\""
			}
			fmt.Fprintf(b, "<td%s>%s</td>", align, html.EscapeString(c))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	for _, n := range t.Notes {
		fmt.Fprintf(b, "<p class=\"note\">%s</p>\n", html.EscapeString(n))
	}
}
