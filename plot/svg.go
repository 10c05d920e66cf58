package plot

import (
	"fmt"
	"html"
	"strings"
)

// svgWriter accumulates SVG markup. Coordinates are written with one
// decimal; text is escaped.
type svgWriter struct {
	b strings.Builder
}

func (s *svgWriter) raw(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func (s *svgWriter) rect(x, y, w, h float64, fill string, extra string) {
	s.raw(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s/>`+"\n", x, y, max(w, 0), max(h, 0), fill, extra)
}

func (s *svgWriter) line(x1, y1, x2, y2 float64, stroke string, extra string) {
	s.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", x1, y1, x2, y2, stroke, extra)
}

// text writes a text element; anchor is start, middle or end.
func (s *svgWriter) text(x, y float64, size float64, anchor, fill, class, body string) {
	s.raw(`<text x="%.1f" y="%.1f" font-size="%g" text-anchor="%s" fill="%s" class="%s">%s</text>`+"\n",
		x, y, size, anchor, fill, class, esc(body))
}

// esc escapes text for XML content and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// fit shortens s to about width pixels of text at font size px (an
// average glyph is taken as 0.58 em wide), ending it with an ellipsis.
func fit(s string, width, px float64) string {
	n := int(width / (0.58 * px))
	r := []rune(s)
	if n <= 1 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// wrapText breaks s into lines of about width pixels at font size px
// (glyphs as fit takes them), at spaces, or inside a long word after a dot
// or a comma; the last of at most maxLines lines is fitted.
func wrapText(s string, width, px float64, maxLines int) []string {
	n := int(width / (0.58 * px))
	var lines []string
	r := []rune(s)
	for len(r) > n && n > 1 && len(lines) < maxLines-1 {
		cut := -1
		for i := n; i > n/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		if cut < 0 {
			for i := n - 1; i > n/2; i-- {
				if r[i] == '.' || r[i] == ',' {
					cut = i + 1
					break
				}
			}
		}
		if cut < 0 {
			cut = n
		}
		lines = append(lines, strings.TrimRight(string(r[:cut]), " "))
		r = []rune(strings.TrimLeft(string(r[cut:]), " "))
	}
	return append(lines, fit(string(r), width, px))
}

// label is name when it fits in width pixels at font size px, else its
// first three letters and a full stop ("opt."), else "".
func label(name string, width, px float64) string {
	switch {
	case width >= 0.58*px*float64(len([]rune(name))):
		return name
	case width >= 0.58*px*4 && len([]rune(name)) > 4:
		return string([]rune(name)[:3]) + "."
	}
	return ""
}
