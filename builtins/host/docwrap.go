package host

import "strings"

// WrapDoc fills the paragraphs of a builtin's doc (separated by blank
// lines) to width columns for a terminal: a paragraph's lines that start
// with "- " are list items, each filled on its own with its continuation
// lines indented. The text ends with a newline.
func WrapDoc(s string, width int) string {
	var paras []string
	for _, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		var out []string
		var words []string
		item := false
		flush := func() {
			if len(words) > 0 {
				first, rest := "", ""
				if item {
					first, rest = "- ", "  "
				}
				out = append(out, fill(words, first, rest, width))
			}
			words = nil
		}
		for _, line := range strings.Split(para, "\n") {
			if strings.HasPrefix(line, "- ") {
				flush()
				item = true
				words = strings.Fields(line[2:])
				continue
			}
			words = append(words, strings.Fields(line)...)
		}
		flush()
		paras = append(paras, strings.Join(out, "\n"))
	}
	return strings.Join(paras, "\n\n") + "\n"
}

// fill lays words out in lines of at most width columns (a longer word gets
// a line of its own), the first line starting with first, the others with
// rest.
func fill(words []string, first, rest string, width int) string {
	var lines []string
	line, empty := first, true
	for _, w := range words {
		if !empty && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line, empty = rest, true
		}
		if !empty {
			line += " "
		}
		line, empty = line+w, false
	}
	return strings.Join(append(lines, line), "\n")
}
