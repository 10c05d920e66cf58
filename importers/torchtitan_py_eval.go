package importers

import (
	"fmt"
	"math/big"
	"sort"
	"strings"

	"go.starlark.net/syntax"
)

// The evaluation of a config function over the parsed syntax tree: a
// walker over calls, keyword arguments, attribute assignments, literals,
// arithmetic, if, and the names a function binds. It builds the config
// tree torchtitan's constructors would (pyObj, with the fields and
// defaults of torchtitan_py_classes.go); it runs no Starlark and no
// Python. A value memsh does not compute (a dataset, a vocabulary size
// from the model's config) is a pyOpaque, which is an error only where
// the plan needs it.

// pyObj is a config object: a torchtitan class's Config. known is nil
// for a class memsh reads no field of (any field may be set).
type pyObj struct {
	class  string
	known  *pyClass
	fields map[string]pyField
}

// pyField is a field's value and the line that set it (0: its default).
type pyField struct {
	v    any
	line int
}

// pyOpaque is a value memsh does not compute.
type pyOpaque struct{ what string }

func (o pyOpaque) String() string { return "a value memsh does not compute (" + o.what + ")" }

// pyName is a name imported from a module, or an attribute of one
// (Trainer.Config).
type pyName struct{ module, name string }

// pyFunc is a function of the file; pyInner a nested def or a lambda,
// which memsh does not call.
type (
	pyFunc  struct{ def *syntax.DefStmt }
	pyInner struct{ name string }
)

// pyEval evaluates functions of one file.
type pyEval struct {
	file    string
	pkg     string // the file's package when under torchtitan/models/<m>/ ("torchtitan.models.<m>"), else ""
	funcs   map[string]*syntax.DefStmt
	imports map[string]pyImport
	globals map[string]any
	depth   int
	steps   int
}

// pyErr is an error at a position of the file.
func (e *pyEval) errAt(pos syntax.Position, format string, args ...any) *Error {
	return &Error{File: e.file, Line: int(pos.Line), Msg: fmt.Sprintf(format, args...), Hint: pySubsetHint}
}

// funcNames lists the file's functions, for an unknown --config.
func (e *pyEval) funcNames() string {
	var names []string
	for n := range e.funcs {
		if !strings.HasPrefix(n, "_") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

type pyEnv struct {
	vars map[string]any
}

// call runs a function of the file with its arguments.
func (e *pyEval) call(pos syntax.Position, def *syntax.DefStmt, args []any, kwargs map[string]any) (any, error) {
	if e.depth++; e.depth > 32 {
		return nil, e.errAt(pos, "calls nested deeper than 32 (a recursion?)")
	}
	defer func() { e.depth-- }()
	env := &pyEnv{vars: map[string]any{}}
	i := 0
	for _, p := range def.Params {
		switch p := p.(type) {
		case *syntax.Ident:
			if i < len(args) {
				env.vars[p.Name], i = args[i], i+1
			} else if v, ok := kwargs[p.Name]; ok {
				env.vars[p.Name] = v
				delete(kwargs, p.Name)
			} else {
				return nil, e.errAt(pos, "%s() needs its argument %s", def.Name.Name, p.Name)
			}
		case *syntax.BinaryExpr: // name=default
			name := p.X.(*syntax.Ident).Name
			if i < len(args) {
				env.vars[name], i = args[i], i+1
			} else if v, ok := kwargs[name]; ok {
				env.vars[name] = v
				delete(kwargs, name)
			} else {
				v, err := e.expr(env, p.Y)
				if err != nil {
					return nil, err
				}
				env.vars[name] = v
			}
		case *syntax.UnaryExpr: // * alone; *args and **kwargs are not read
			if p.X != nil {
				return nil, e.errAt(p.OpPos, "%s() takes *args or **kwargs, which memsh does not read", def.Name.Name)
			}
		}
	}
	if i < len(args) || len(kwargs) > 0 {
		return nil, e.errAt(pos, "%s() given arguments it does not take", def.Name.Name)
	}
	v, _, err := e.block(env, def.Body)
	return v, err
}

// block runs statements; returned says a return ran.
func (e *pyEval) block(env *pyEnv, stmts []syntax.Stmt) (v any, returned bool, err error) {
	for _, s := range stmts {
		if e.steps++; e.steps > 100000 {
			return nil, false, e.errAt(pyStart(s), "more than 100,000 steps: not a config function")
		}
		switch s := s.(type) {
		case *syntax.ReturnStmt:
			if s.Result == nil {
				return nil, true, nil
			}
			v, err := e.expr(env, s.Result)
			return v, true, err
		case *syntax.AssignStmt:
			if err := e.assign(env, s); err != nil {
				return nil, false, err
			}
		case *syntax.ExprStmt:
			if _, ok := s.X.(*syntax.Literal); ok { // a docstring
				continue
			}
			if _, err := e.expr(env, s.X); err != nil {
				return nil, false, err
			}
		case *syntax.IfStmt:
			c, err := e.expr(env, s.Cond)
			if err != nil {
				return nil, false, err
			}
			b, ok := pyTruth(c)
			if !ok {
				return nil, false, e.errAt(s.If, "an if on %s", describe(c))
			}
			branch := s.False
			if b {
				branch = s.True
			}
			if v, ret, err := e.block(env, branch); ret || err != nil {
				return v, ret, err
			}
		case *syntax.BranchStmt:
			if s.Token != syntax.PASS {
				return nil, false, e.errAt(s.TokenPos, "a %s statement (a loop)", s.Token)
			}
		case *syntax.DefStmt:
			env.vars[s.Name.Name] = pyInner{s.Name.Name}
		case *syntax.ForStmt:
			return nil, false, e.errAt(s.For, "a for loop")
		case *syntax.WhileStmt:
			return nil, false, e.errAt(s.While, "a while loop")
		default:
			return nil, false, e.errAt(pyStart(s), "a statement memsh does not read")
		}
	}
	return nil, false, nil
}

func (e *pyEval) assign(env *pyEnv, s *syntax.AssignStmt) error {
	rhs, err := e.expr(env, s.RHS)
	if err != nil {
		return err
	}
	if s.Op != syntax.EQ { // x += y
		old, err := e.expr(env, s.LHS)
		if err != nil {
			return err
		}
		op := map[syntax.Token]syntax.Token{syntax.PLUS_EQ: syntax.PLUS, syntax.MINUS_EQ: syntax.MINUS, syntax.STAR_EQ: syntax.STAR,
			syntax.SLASH_EQ: syntax.SLASH, syntax.SLASHSLASH_EQ: syntax.SLASHSLASH, syntax.PERCENT_EQ: syntax.PERCENT}[s.Op]
		if rhs, err = e.arith(s.OpPos, op, old, rhs); err != nil {
			return err
		}
	}
	switch l := s.LHS.(type) {
	case *syntax.Ident:
		env.vars[l.Name] = rhs
		return nil
	case *syntax.DotExpr:
		x, err := e.expr(env, l.X)
		if err != nil {
			return err
		}
		o, ok := x.(*pyObj)
		if !ok {
			if _, opaque := x.(pyOpaque); opaque {
				return nil // a field of a value memsh does not compute
			}
			return e.errAt(l.Dot, "setting .%s of %s", l.Name.Name, describe(x))
		}
		return e.setField(o, l.Name.Name, rhs, int(s.OpPos.Line), l.Dot)
	}
	return e.errAt(s.OpPos, "an assignment to %s (memsh reads names and attributes)", pyKind(s.LHS))
}

// setField sets a field, as a dataclass with slots does: a field the
// class lacks is an error.
func (e *pyEval) setField(o *pyObj, name string, v any, line int, pos syntax.Position) error {
	if o.known != nil && !o.known.has(name) {
		return e.errAt(pos, "%s has no field %s (torchtitan raises the same); its fields: %s", o.class, name, o.known.fieldNames())
	}
	o.fields[name] = pyField{v: v, line: line}
	return nil
}

func pyKind(x syntax.Node) string {
	return strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%T", x), "*syntax."))
}

// pyTruth is Python's truth of a value, when memsh computes it.
func pyTruth(v any) (bool, bool) {
	switch x := v.(type) {
	case nil:
		return false, true
	case bool:
		return x, true
	case int64:
		return x != 0, true
	case float64:
		return x != 0, true
	case string:
		return x != "", true
	case []any:
		return len(x) > 0, true
	case map[string]any:
		return len(x) > 0, true
	case *pyObj, pyName, pyFunc, pyInner:
		return true, true
	}
	return false, false
}

func (e *pyEval) expr(env *pyEnv, x syntax.Expr) (any, error) {
	switch x := x.(type) {
	case *syntax.Ident:
		return e.lookup(env, x)
	case *syntax.Literal:
		switch v := x.Value.(type) {
		case string, int64, float64:
			return v, nil
		case *big.Int:
			return nil, e.errAt(x.TokenPos, "the number %s is too large", x.Raw)
		}
		return nil, e.errAt(x.TokenPos, "a bytes literal")
	case *syntax.ParenExpr:
		return e.expr(env, x.X)
	case *syntax.ListExpr:
		return e.list(env, x.List)
	case *syntax.TupleExpr:
		return e.list(env, x.List)
	case *syntax.DictExpr:
		m := map[string]any{}
		for _, en := range x.List {
			en := en.(*syntax.DictEntry)
			k, err := e.expr(env, en.Key)
			if err != nil {
				return nil, err
			}
			v, err := e.expr(env, en.Value)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				return pyOpaque{"a dict"}, nil
			}
			m[ks] = v
		}
		return m, nil
	case *syntax.UnaryExpr:
		v, err := e.expr(env, x.X)
		if err != nil {
			return nil, err
		}
		switch {
		case x.Op == syntax.NOT:
			if b, ok := pyTruth(v); ok {
				return !b, nil
			}
			return pyOpaque{"not " + describe(v)}, nil
		case x.Op == syntax.MINUS || x.Op == syntax.PLUS:
			return e.arith(x.OpPos, x.Op, int64(0), v)
		}
		return nil, e.errAt(x.OpPos, "the operator %s", x.Op)
	case *syntax.BinaryExpr:
		return e.binary(env, x)
	case *syntax.CondExpr:
		c, err := e.expr(env, x.Cond)
		if err != nil {
			return nil, err
		}
		b, ok := pyTruth(c)
		if !ok {
			return nil, e.errAt(x.If, "an if on %s", describe(c))
		}
		if b {
			return e.expr(env, x.True)
		}
		return e.expr(env, x.False)
	case *syntax.DotExpr:
		v, err := e.expr(env, x.X)
		if err != nil {
			return nil, err
		}
		return e.attr(v, x.Name.Name, x.Dot)
	case *syntax.IndexExpr:
		v, err := e.expr(env, x.X)
		if err != nil {
			return nil, err
		}
		i, err := e.expr(env, x.Y)
		if err != nil {
			return nil, err
		}
		return pyIndex(v, i), nil
	case *syntax.CallExpr:
		return e.callExpr(env, x)
	case *syntax.LambdaExpr:
		return pyInner{"lambda"}, nil
	case *syntax.Comprehension:
		return nil, e.errAt(x.Lbrack, "a comprehension (a loop)")
	}
	return nil, e.errAt(pyStart(x), "a %s", pyKind(x))
}

func (e *pyEval) list(env *pyEnv, xs []syntax.Expr) (any, error) {
	out := make([]any, 0, len(xs))
	for _, x := range xs {
		v, err := e.expr(env, x)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// lookup finds a name: the function's, the file's, an import, a builtin.
func (e *pyEval) lookup(env *pyEnv, id *syntax.Ident) (any, error) {
	if v, ok := env.vars[id.Name]; ok {
		return v, nil
	}
	if v, ok := e.globals[id.Name]; ok {
		return v, nil
	}
	if def, ok := e.funcs[id.Name]; ok {
		return pyFunc{def}, nil
	}
	if im, ok := e.imports[id.Name]; ok {
		mod := im.module
		if strings.HasPrefix(mod, ".") { // relative: the file's package
			if e.pkg == "" {
				err := e.errAt(id.NamePos, "%s comes from %s, a module beside this file, which memsh does not read (it reads one file)", id.Name, mod)
				err.Hint = "a model's own config_registry.py resolves `from . import model_registry` when read where torchtitan keeps it: " +
					"pass it as .../models/<model>/config_registry.py (e.g. torchtitan/models/llama3/config_registry.py in the checkout); " + pySubsetHint
				return nil, err
			}
			mod = e.pkg + strings.TrimRight(mod, ".")
			if rest := strings.TrimLeft(im.module, "."); rest != "" {
				mod = e.pkg + "." + rest
			}
		}
		if !pyLibrary(mod) {
			return nil, e.errAt(id.NamePos, "%s comes from %s, another module, which memsh does not read (it reads one file): check the module that defines it", id.Name, mod)
		}
		if im.name == "" {
			return pyName{module: mod}, nil
		}
		return pyName{module: mod, name: im.name}, nil
	}
	switch id.Name {
	case "True":
		return true, nil
	case "False":
		return false, nil
	case "None":
		return nil, nil
	case "len", "int", "float", "str", "bool", "list", "dict", "tuple", "min", "max":
		return pyName{module: "builtins", name: id.Name}, nil
	}
	return nil, e.errAt(id.NamePos, "%s is neither defined in the file nor imported", id.Name)
}

// pyLibrary says whether a module is torchtitan's library (or Python's
// or torch's), whose names memsh stands in for or leaves opaque; a
// module of configs (torchtitan_recipes, a config_registry) is not.
func pyLibrary(mod string) bool {
	top, _, _ := strings.Cut(mod, ".")
	switch {
	case strings.HasSuffix(mod, ".config_registry"):
		return false
	case top == "torchtitan", top == "torch", top == "typing", top == "dataclasses", top == "functools", top == "math", top == "__future__":
		return true
	}
	return false
}

func (e *pyEval) attr(v any, name string, pos syntax.Position) (any, error) {
	switch x := v.(type) {
	case *pyObj:
		if f, ok := x.fields[name]; ok {
			return f.v, nil
		}
		if x.known != nil {
			if !x.known.has(name) {
				return nil, e.errAt(pos, "%s has no field %s; its fields: %s", x.class, name, x.known.fieldNames())
			}
			d := x.known.defaultOf(name)
			x.fields[name] = pyField{v: d}
			return d, nil
		}
		return pyOpaque{x.class + "." + name}, nil
	case pyName:
		if x.name == "" {
			return pyName{module: x.module + "." + name}, nil
		}
		return pyName{module: x.module, name: x.name + "." + name}, nil
	case pyOpaque:
		return pyOpaque{x.what + "." + name}, nil
	}
	return nil, e.errAt(pos, ".%s of %s", name, describe(v))
}

func pyIndex(v, i any) any {
	switch x := v.(type) {
	case []any:
		if n, ok := i.(int64); ok {
			if n < 0 {
				n += int64(len(x))
			}
			if n >= 0 && n < int64(len(x)) {
				return x[n]
			}
		}
	case map[string]any:
		if s, ok := i.(string); ok {
			if y, ok := x[s]; ok {
				return y
			}
		}
	}
	return pyOpaque{"an item of " + describe(v)}
}

func (e *pyEval) callExpr(env *pyEnv, x *syntax.CallExpr) (any, error) {
	fn, err := e.expr(env, x.Fn)
	if err != nil {
		return nil, err
	}
	var args []any
	kwargs, lines := map[string]any{}, map[string]int{}
	var order []string
	for _, a := range x.Args {
		switch a := a.(type) {
		case *syntax.BinaryExpr:
			if a.Op == syntax.EQ {
				name := a.X.(*syntax.Ident).Name
				v, err := e.expr(env, a.Y)
				if err != nil {
					return nil, err
				}
				kwargs[name], lines[name] = v, int(a.OpPos.Line)
				order = append(order, name)
				continue
			}
		case *syntax.UnaryExpr:
			if a.Op == syntax.STAR || a.Op == syntax.STARSTAR {
				return nil, e.errAt(a.OpPos, "an argument list unpacked with %s", a.Op)
			}
		}
		v, err := e.expr(env, a)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	c := &pyCall{pos: x.Lparen, args: args, kwargs: kwargs, lines: lines, order: order}
	switch f := fn.(type) {
	case pyFunc:
		return e.call(x.Lparen, f.def, args, kwargs)
	case pyName:
		return e.standIn(f, c)
	case pyInner:
		return nil, e.errAt(x.Lparen, "a call of %s, a function defined inside a function", f.name)
	case pyOpaque:
		return pyOpaque{f.what + "(...)"}, nil
	}
	return nil, e.errAt(x.Lparen, "a call of %s", describe(fn))
}

// pyCall is a call's arguments, with the line of each keyword.
type pyCall struct {
	pos    syntax.Position
	args   []any
	kwargs map[string]any
	lines  map[string]int
	order  []string
}

// construct builds an object of class c from a call's keywords.
func (e *pyEval) construct(class string, known *pyClass, c *pyCall) (*pyObj, error) {
	if len(c.args) > 0 && known != nil {
		return nil, e.errAt(c.pos, "%s takes keyword arguments only (its dataclass is kw_only)", class)
	}
	o := &pyObj{class: class, known: known, fields: map[string]pyField{}}
	if known != nil {
		for _, f := range known.fields {
			if f.obj != "" { // a default_factory: its own default object
				o.fields[f.name] = pyField{v: known.defaultOf(f.name)}
			}
		}
	}
	for _, k := range c.order {
		if err := e.setField(o, k, c.kwargs[k], c.lines[k], c.pos); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// pyStart is where a node starts.
func pyStart(n syntax.Node) syntax.Position {
	start, _ := n.Span()
	return start
}
