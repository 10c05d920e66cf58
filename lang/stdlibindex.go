package lang

import (
	"io/fs"
	"path"
	"sort"
	"strings"

	"go.starlark.net/syntax"
)

// Export is a public top-level name of a stdlib module.
type Export struct {
	Name   string // "to_gib"
	Module string // "@stdlib//units.star"
	Sig    string // "to_gib(n)"; the name alone for a constant
	Doc    string // the function's docstring, dedented; "" for constants
}

// StdlibExports lists the public names (no leading "_") that the stdlib
// modules define at top level, sorted by module and name. It parses the
// modules without running them.
func StdlibExports(stdlib fs.FS) ([]Export, error) {
	var out []Export
	err := fs.WalkDir(stdlib, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".star" {
			return err
		}
		src, err := fs.ReadFile(stdlib, p)
		if err != nil {
			return err
		}
		f, err := FileOptions().Parse(p, src, 0)
		if err != nil {
			return err
		}
		out = append(out, fileExports(stdlibPrefix+p, src, f)...)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}

func fileExports(module string, src []byte, f *syntax.File) []Export {
	var out []Export
	for _, stmt := range f.Stmts {
		switch s := stmt.(type) {
		case *syntax.DefStmt:
			if strings.HasPrefix(s.Name.Name, "_") {
				continue
			}
			var params []string
			for _, p := range s.Params {
				params = append(params, exprText(src, p))
			}
			out = append(out, Export{
				Name:   s.Name.Name,
				Module: module,
				Sig:    s.Name.Name + "(" + strings.Join(params, ", ") + ")",
				Doc:    docstring(s.Body),
			})
		case *syntax.AssignStmt:
			if id, ok := s.LHS.(*syntax.Ident); ok && !strings.HasPrefix(id.Name, "_") {
				out = append(out, Export{Name: id.Name, Module: module, Sig: id.Name})
			}
		}
	}
	return out
}

// exprText returns the source text of e.
func exprText(src []byte, e syntax.Expr) string {
	start, end := e.Span()
	lines := strings.Split(string(src), "\n")
	if start.Line != end.Line || int(start.Line) > len(lines) {
		return "..."
	}
	line := []rune(lines[start.Line-1])
	a, b := int(start.Col)-1, int(end.Col)-1
	if a < 0 || b > len(line) || a > b {
		return "..."
	}
	return string(line[a:b])
}

// docstring returns the dedented string literal that starts body, or "".
func docstring(body []syntax.Stmt) string {
	if len(body) == 0 {
		return ""
	}
	es, ok := body[0].(*syntax.ExprStmt)
	if !ok {
		return ""
	}
	lit, ok := es.X.(*syntax.Literal)
	if !ok || lit.Token != syntax.STRING {
		return ""
	}
	s, _ := lit.Value.(string)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	indent := -1
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i := 1; i < len(lines); i++ {
		if len(lines[i]) >= indent && indent > 0 {
			lines[i] = lines[i][indent:]
		} else {
			lines[i] = strings.TrimSpace(lines[i])
		}
	}
	return strings.Join(lines, "\n")
}
