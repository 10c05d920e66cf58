package plot

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Section is one part of an HTML page: a chart (optional) and the text of
// its table as print() renders it (optional).
type Section struct {
	Chart *Chart
	Table string
}

// WriteHTML writes a standalone HTML page headed by title with, per
// section, the chart's SVG inline and the table as preformatted text.
func WriteHTML(w io.Writer, title string, sections []Section) error {
	if len(sections) == 0 {
		return errors.New("nothing to plot: no report")
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>%s</title>
<style>
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: %dpx; color: #222; }
h1 { font-size: 1.3em; }
section { margin-bottom: 2.5em; }
svg { display: block; max-width: 100%%; height: auto; border: 1px solid #ddd; }
pre { background: #f6f6f6; padding: 0.8em 1em; overflow-x: auto; font-size: 13px; line-height: 1.35; }
</style>
</head>
<body>
<h1>%s</h1>
`, esc(title), Width+40, esc(title))
	for i, sec := range sections {
		fmt.Fprintf(&b, "<section id=\"r%d\">\n", i+1)
		if sec.Chart != nil {
			svg, err := svgDocument([]Chart{*sec.Chart})
			if err != nil {
				return err
			}
			b.WriteString(svg)
		}
		if sec.Table != "" {
			fmt.Fprintf(&b, "<pre>%s</pre>\n", esc(strings.TrimRight(sec.Table, "\n")))
		}
		b.WriteString("</section>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
