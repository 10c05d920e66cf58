package lang

import (
	"fmt"
	"strings"

	"go.starlark.net/syntax"
)

// nameHint is the hint for an undefined name: the stdlib module that
// exports it (hintFor), else the closest name in scope, a typo's fix
// ("trian" -> "did you mean \"train\"?"): the predeclared names, the
// globals the file binds at its top level (a REPL chunk's; the resolver
// suggests a script's own), and those the format was given.
func (p *printer) nameHint(msg string, pos syntax.Position) string {
	if h := hintFor(msg, p.f.Stdlib); h != "" {
		return h
	}
	m := undefinedRE.FindStringSubmatch(msg)
	if m == nil || strings.Contains(msg, "did you mean") { // the resolver's own, among the file's names
		return ""
	}
	names := append([]string(nil), p.f.Names...)
	if p.f.Sources != nil && pos.IsValid() {
		if src, ok := p.f.Sources.Source(pos.Filename()); ok {
			names = append(names, topLevelNames(pos.Filename(), src)...)
		}
	}
	return closestName(m[1], names)
}

// closestName is "did you mean ...?" for the name nearest to name, when a
// typo explains the difference: one edit (a letter added, dropped,
// changed, or two neighbours swapped) for names of 3 or 4 letters, two for
// longer ones, none for shorter ones, which any short name is close to.
func closestName(name string, names []string) string {
	limit := 2
	switch n := len([]rune(name)); {
	case n <= 2:
		return ""
	case n <= 4:
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range names {
		if c == name || strings.HasPrefix(c, "_") {
			continue
		}
		if d := typoDistance(name, c); d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// topLevelNames are the names a file binds at its top level: assigned,
// defined, loaded, or bound by a for loop.
func topLevelNames(filename string, src []byte) []string {
	f, err := FileOptions().Parse(filename, src, 0)
	if err != nil {
		return nil
	}
	var out []string
	var bind func(e syntax.Expr)
	bind = func(e syntax.Expr) {
		switch x := e.(type) {
		case *syntax.Ident:
			out = append(out, x.Name)
		case *syntax.TupleExpr:
			for _, y := range x.List {
				bind(y)
			}
		case *syntax.ListExpr:
			for _, y := range x.List {
				bind(y)
			}
		case *syntax.ParenExpr:
			bind(x.X)
		}
	}
	var stmts func(ss []syntax.Stmt)
	stmts = func(ss []syntax.Stmt) {
		for _, st := range ss {
			switch x := st.(type) {
			case *syntax.AssignStmt:
				bind(x.LHS)
			case *syntax.DefStmt:
				out = append(out, x.Name.Name)
			case *syntax.LoadStmt:
				for _, id := range x.To {
					out = append(out, id.Name)
				}
			case *syntax.ForStmt:
				bind(x.Vars)
				stmts(x.Body)
			case *syntax.IfStmt:
				stmts(x.True)
				stmts(x.False)
			}
		}
	}
	stmts(f.Stmts)
	return out
}

// typoDistance is the optimal string alignment distance between a and b:
// the edits (insert, delete, substitute, swap two neighbours) that turn
// one into the other, each part of the string edited once.
func typoDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
