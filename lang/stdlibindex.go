package lang

import (
	"fmt"
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
// modules without running them. A module is a file at the stdlib's root;
// a folder holds the parts a module loads (llm/*.star, llm.star's), whose
// names count as the module's where it binds them again (gpt2 = _gpt2 of
// load("llm/dense.star", _gpt2 = "gpt2")): such a name takes the part's
// signature and docstring. A name bound again from a part that does not
// define it is an error.
func StdlibExports(stdlib fs.FS) ([]Export, error) {
	var out []Export
	entries, err := fs.ReadDir(stdlib, ".")
	if err != nil {
		return nil, err
	}
	parts := stdlibParts{fs: stdlib, defs: map[string]partDefs{}}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".star" {
			continue
		}
		ex, err := parts.moduleExports(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, ex...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// parseStdlib parses the stdlib file p.
func parseStdlib(stdlib fs.FS, p string) ([]byte, *syntax.File, error) {
	src, err := fs.ReadFile(stdlib, p)
	if err != nil {
		return nil, nil, err
	}
	f, err := FileOptions().Parse(p, src, 0)
	return src, f, err
}

// stdlibParts are the parts of the stdlib modules, each parsed once,
// however many names the modules bind again from it.
type stdlibParts struct {
	fs   fs.FS
	defs map[string]partDefs // by the part's path
}

// partDefs are a part's functions by name, or why it could not be read.
type partDefs struct {
	funcs map[string]Export
	err   error
}

// moduleExports lists the public names of the stdlib module p, those it
// binds again from its parts resolved to the parts' definitions.
func (ps stdlibParts) moduleExports(p string) ([]Export, error) {
	src, f, err := parseStdlib(ps.fs, p)
	if err != nil {
		return nil, err
	}
	module := stdlibPrefix + p
	loaded := map[string]loadedName{} // file-local name -> the part and its name there
	var out []Export
	for _, stmt := range f.Stmts {
		switch s := stmt.(type) {
		case *syntax.LoadStmt:
			for i, to := range s.To {
				part := s.ModuleName()
				if rest, ok := strings.CutPrefix(part, stdlibPrefix); ok {
					part = rest
				} else {
					part = path.Join(path.Dir(p), part)
				}
				loaded[to.Name] = loadedName{part, s.From[i].Name}
			}
		case *syntax.DefStmt:
			if !strings.HasPrefix(s.Name.Name, "_") {
				out = append(out, defExport(module, src, s))
			}
		case *syntax.AssignStmt:
			id, ok := s.LHS.(*syntax.Ident)
			if !ok || strings.HasPrefix(id.Name, "_") {
				continue
			}
			x := Export{Name: id.Name, Module: module, Sig: id.Name}
			if rhs, ok := s.RHS.(*syntax.Ident); ok {
				if l, ok := loaded[rhs.Name]; ok {
					def, err := ps.def(l)
					if err != nil {
						return nil, fmt.Errorf("%s: %s = %s: %w", module, id.Name, rhs.Name, err)
					}
					x.Sig = id.Name + strings.TrimPrefix(def.Sig, def.Name)
					x.Doc = def.Doc
				}
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// loadedName is a name a module loads: the part's path and its name there.
type loadedName struct{ part, name string }

// def returns the definition of l.name in the part l.part, parsing the
// part the first time one of its names is asked for.
func (ps stdlibParts) def(l loadedName) (Export, error) {
	d, ok := ps.defs[l.part]
	if !ok {
		d.funcs = map[string]Export{}
		src, f, err := parseStdlib(ps.fs, l.part)
		if err != nil {
			d.err = err
		} else {
			for _, stmt := range f.Stmts {
				if s, ok := stmt.(*syntax.DefStmt); ok {
					d.funcs[s.Name.Name] = defExport(stdlibPrefix+l.part, src, s)
				}
			}
		}
		ps.defs[l.part] = d
	}
	if d.err != nil {
		return Export{}, d.err
	}
	if x, ok := d.funcs[l.name]; ok {
		return x, nil
	}
	return Export{}, fmt.Errorf("%s defines no function %s", stdlibPrefix+l.part, l.name)
}

// defExport describes the function s of module.
func defExport(module string, src []byte, s *syntax.DefStmt) Export {
	var params []string
	for _, p := range s.Params {
		params = append(params, exprText(src, p))
	}
	return Export{
		Name:   s.Name.Name,
		Module: module,
		Sig:    s.Name.Name + "(" + strings.Join(params, ", ") + ")",
		Doc:    docstring(s.Body),
	}
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
