package importers

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.starlark.net/syntax"
)

// torchtitan's Python configs (since pytorch/torchtitan 9810191bb,
// 2026-02-23: "Config System Refactor: TOML to Python Dataclass
// Registry") are functions returning Trainer.Config: straight-line
// constructor calls and attribute assignments. memsh reads them with
// go.starlark.net's parser (Starlark's grammar is a subset of Python's)
// after a rewrite of the four things of that subset the grammar lacks,
// each replaced line for line so positions stay the file's:
//
//   - import lines (from M import a, b as c; import M): replaced by pass,
//     their names recorded with the module each comes from;
//   - a def's return annotation (-> Trainer.Config) and its parameters'
//     annotations (x: int = 1): removed;
//   - assert statements: replaced by pass (memsh does not check them);
//   - a comparison with None by is or is not: == None or != None.
//
// The rewrite is on lines, not tokens: an import, assert or def line
// inside a triple-quoted string (or "is None" inside a string) is
// rewritten too, which changes only that string's text. Whatever else the grammar lacks (a class, a decorator,
// with, try, an f-string, is) is a parse error at its position.

// pyImport is a name an import binds: local name, module, and the name in
// that module ("" for import M).
type pyImport struct {
	local, module, name string
	line                int
}

var (
	pyImportLine = regexp.MustCompile(`^(\s*)(?:from\s+([.\w]+)\s+import\s+(.*)|import\s+(.*))$`)
	pyAssertLine = regexp.MustCompile(`^(\s*)assert\b`)
	pyDefLine    = regexp.MustCompile(`^\s*def\s+\w+\s*\(`)
	pyReturnAnn  = regexp.MustCompile(`\)\s*->\s*[^:#]+:\s*(#.*)?$`)
	pyIsNone     = regexp.MustCompile(`\bis(\s+not)?\s+None\b`)
	pyFString    = regexp.MustCompile(`(?:^|[^\w])((?:[fF][rR]?|[rR][fF])["'])`)
)

// pyRewrite rewrites a Python config's source into Starlark's grammar
// (above) and returns its imports.
func pyRewrite(src string) (string, []pyImport, error) {
	lines := strings.Split(src, "\n")
	var imports []pyImport
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := pyImportLine.FindStringSubmatch(line); m != nil {
			text, first := m[3]+m[4], i
			for open := strings.Count(text, "(") > strings.Count(text, ")"); (open || strings.HasSuffix(strings.TrimSpace(stripComment(text)), `\`)) && i+1 < len(lines); {
				i++
				text += " " + lines[i]
				lines[i] = ""
				open = strings.Count(text, "(") > strings.Count(text, ")")
			}
			lines[first] = m[1] + "pass"
			got, err := pyImportNames(m[2], m[4] != "", text, first+1)
			if err != nil {
				return "", nil, err
			}
			imports = append(imports, got...)
			continue
		}
		if m := pyAssertLine.FindStringSubmatch(line); m != nil {
			depth := pyDepth(line)
			lines[i] = m[1] + "pass"
			for (depth > 0 || strings.HasSuffix(strings.TrimSpace(stripComment(line)), `\`)) && i+1 < len(lines) {
				i++
				line = lines[i]
				depth += pyDepth(line)
				lines[i] = ""
			}
			continue
		}
		lines[i] = pyIsNone.ReplaceAllStringFunc(line, func(m string) string {
			if strings.Contains(m, "not") {
				return "!= None"
			}
			return "== None"
		})
		if pyDefLine.MatchString(lines[i]) {
			end, ok := pyStripSignature(lines, i)
			if !ok {
				return "", nil, &Error{Line: i + 1, Msg: "a def whose parameters never close (no matching ')')", Hint: pySubsetHint}
			}
			i = end
		}
	}
	return strings.Join(lines, "\n"), imports, nil
}

// stripComment drops a # comment (a # inside a string is rare on an
// import or assert line).
func stripComment(s string) string {
	if i := strings.Index(s, "#"); i >= 0 {
		return s[:i]
	}
	return s
}

// pyDepth is the brackets a line opens minus those it closes.
func pyDepth(s string) int {
	s = stripComment(s)
	return strings.Count(s, "(") + strings.Count(s, "[") + strings.Count(s, "{") -
		strings.Count(s, ")") - strings.Count(s, "]") - strings.Count(s, "}")
}

// pyImportNames reads the names of one import statement.
func pyImportNames(from string, plain bool, text string, line int) ([]pyImport, error) {
	text = strings.NewReplacer("(", " ", ")", " ", `\`, " ").Replace(stripComment(text))
	var out []pyImport
	for _, part := range strings.Split(text, ",") {
		f := strings.Fields(part)
		var name, local string
		switch {
		case len(f) == 0:
			continue
		case len(f) == 1:
			name, local = f[0], f[0]
		case len(f) == 3 && f[1] == "as":
			name, local = f[0], f[2]
		default:
			return nil, &syntax.Error{Pos: syntax.MakePosition(nil, int32(line), 1), Msg: fmt.Sprintf("an import memsh does not read: %q", strings.TrimSpace(part))}
		}
		if name == "*" {
			return nil, &syntax.Error{Pos: syntax.MakePosition(nil, int32(line), 1), Msg: "from " + from + " import *: memsh needs to know where each name comes from"}
		}
		if plain { // import a.b.c binds a; import a.b as c binds c to a.b
			if local == name {
				local, _, _ = strings.Cut(name, ".")
				name = local
			}
			out = append(out, pyImport{local: local, module: name, line: line})
			continue
		}
		out = append(out, pyImport{local: local, module: from, name: name, line: line})
	}
	return out, nil
}

// pyStripSignature removes the annotations of the def starting at line i
// (its parameters' and its return's) and returns the signature's last
// line; ok is false when the parameters' bracket never closes (malformed
// Python, reported at the def rather than at the end of the file).
func pyStripSignature(lines []string, i int) (end int, ok bool) {
	depth, inAnn := 0, false
	for j := i; j < len(lines); j++ {
		var b strings.Builder
		line := lines[j]
		for k := 0; k < len(line); k++ {
			c := line[k]
			if c == '#' {
				b.WriteString(line[k:])
				break
			}
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			}
			if depth == 0 && c == ')' { // the parameters' end
				b.WriteByte(c)
				rest := line[k+1:]
				if pyReturnAnn.MatchString(")" + rest) {
					rest = ":"
				}
				b.WriteString(rest)
				lines[j] = b.String()
				return j, true
			}
			switch {
			case inAnn && depth == 1 && (c == ',' || c == '='):
				inAnn = false
			case inAnn && depth == 0:
				inAnn = false
			case depth == 1 && c == ':':
				inAnn = true
				continue
			}
			if !inAnn {
				b.WriteByte(c)
			}
		}
		lines[j] = b.String()
	}
	return len(lines) - 1, false
}

// pyParse parses a rewritten config; a parse error names the construct
// when memsh knows it (an f-string, a class, a decorator).
func pyParse(file, src, rewritten string) (*syntax.File, error) {
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
	f, err := opts.Parse(file, rewritten, 0)
	if err == nil {
		return f, nil
	}
	var se syntax.Error
	if !errors.As(err, &se) {
		return nil, &Error{File: file, Msg: err.Error(), Hint: pySubsetHint}
	}
	line := int(se.Pos.Line)
	what := "Python memsh does not read (" + se.Msg + ")"
	col := int(se.Pos.Col)
	if src := strings.Split(src, "\n"); line >= 1 && line <= len(src) {
		text := strings.TrimSpace(src[line-1])
		switch m := pyFString.FindStringSubmatchIndex(src[line-1]); {
		case m != nil:
			what, col = "an f-string", m[2]+1
		case strings.HasPrefix(text, "class "):
			what = "a class definition"
		case strings.HasPrefix(text, "@"):
			what = "a decorator"
		case strings.HasPrefix(text, "with ") || strings.HasPrefix(text, "try:"):
			what = "a " + strings.Fields(text)[0] + " statement"
		case strings.Contains(" "+text+" ", " is "):
			what = "an is comparison"
		}
	}
	return nil, &Error{File: file, Line: line, Msg: what + " at column " + fmt.Sprint(col), Hint: pySubsetHint}
}

// pySubsetHint is what every error about the Python memsh reads says.
const pySubsetHint = "memsh reads config functions of constructor calls, attribute assignments, literals, arithmetic and if, calling the file's own functions; " +
	"or dump the resolved config: debug.save_config_file (or print_config) writes Trainer.Config.to_dict()"
