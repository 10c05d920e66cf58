package host

import (
	"strings"
	"unicode/utf8"
)

// textGrid lays out rows of cells in aligned columns for printed tables.
// Widths are computed on plain text (count runes), so colour can be added
// to a rendered cell afterwards without breaking the alignment.
type TextGrid struct {
	Right []bool // per column: right-align (numbers)
	rows  [][]string
}

func (g *TextGrid) Add(cells ...string) { g.rows = append(g.rows, cells) }

// write renders the grid with two spaces between columns and an indent
// before each line; trailing spaces are trimmed.
func (g *TextGrid) Write(b *strings.Builder, indent string) {
	var widths []int
	for _, r := range g.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range g.rows {
		var line strings.Builder
		line.WriteString(indent)
		for i, c := range r {
			if i > 0 {
				line.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i < len(g.Right) && g.Right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
}

// thousands writes n with comma separators: 6,738,415,616.
func Thousands(n int64) string {
	neg := n < 0
	u := uint64(n)
	if neg {
		u = uint64(-n)
	}
	s := []byte{}
	digits := 0
	for {
		if digits > 0 && digits%3 == 0 {
			s = append(s, ',')
		}
		s = append(s, byte('0'+u%10))
		digits++
		u /= 10
		if u == 0 {
			break
		}
	}
	if neg {
		s = append(s, '-')
	}
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return string(s)
}
