package repl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/lang"
	"go.starlark.net/starlark"
)

// keywords are Starlark's reserved words, for completion and :help.
var keywords = []string{
	"and", "break", "continue", "def", "elif", "else", "for", "if", "in",
	"lambda", "load", "not", "or", "pass", "return", "None", "True", "False",
}

func (s *Session) cmdHelp(ctx context.Context, arg string) error {
	name := strings.TrimSpace(arg)
	if name == "" {
		s.helpIndex(s.out)
		return nil
	}
	if !s.helpName(s.out, name) {
		topics := s.helpTopics()
		if h := builtins.AliasHint(name); h != "" {
			s.errorf("no help for %q: %s", name, h)
			return nil
		}
		if near := nearest(name, topics); len(near) > 0 {
			s.errorf("no help for %q (did you mean %s?)", name, orList(near))
		} else {
			s.errorf("no help for %q (:help lists the builtins and stdlib names)", name)
		}
	}
	return nil
}

// helpIndex lists the commands, the builtins (grouped by module) and the
// stdlib modules with their names.
func (s *Session) helpIndex(w io.Writer) {
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-14s %s\n", strings.TrimSpace(":"+c.name+" "+c.args), c.help)
		}
	}
	fmt.Fprint(w, `
Type a statement to run it, or an expression to see its value (also
bound to _). A line ending in ':' or an open bracket continues on the
next line; a blank line ends a block. Tab completes names, attributes
after "x.", keyword arguments inside a call and @stdlib// paths inside
load(). Ctrl-C stops a running statement; Ctrl-D leaves.
`)
	var top []string
	modules := map[string][]string{}
	for _, b := range builtins.All() {
		if mod, member, ok := strings.Cut(b.Name, "."); ok {
			modules[mod] = append(modules[mod], member)
			continue
		}
		top = append(top, b.Name)
	}
	fmt.Fprintln(w, "\nBuiltins (:help NAME for details):")
	fmt.Fprint(w, fill(top, "  ", "  ", 78))
	mods := make([]string, 0, len(modules))
	for m := range modules {
		mods = append(mods, m)
	}
	sort.Strings(mods)
	for _, m := range mods {
		fmt.Fprintf(w, "\nModule %s (%s.NAME):\n", m, m)
		fmt.Fprint(w, fill(modules[m], "  ", "  ", 78))
	}
	module := ""
	var names []string
	flush := func() {
		if module != "" {
			fmt.Fprintf(w, "\n%s (load(%q, NAME)):\n", module, module)
			fmt.Fprint(w, fill(names, "  ", "  ", 78))
		}
	}
	for _, x := range s.stdlibExports() {
		if x.Module != module {
			flush()
			module, names = x.Module, nil
		}
		names = append(names, x.Name)
	}
	flush()
}

// helpName documents name: a command, builtin, builtin module, stdlib
// name, a global of the session, or a builtin's keyword or report field.
// It reports whether it found one.
func (s *Session) helpName(w io.Writer, name string) bool {
	if cname, ok := strings.CutPrefix(name, ":"); ok {
		for _, c := range commands() {
			if c.name == cname {
				fmt.Fprintf(w, "%s\n\n%s", strings.TrimSpace(":"+c.name+" "+c.args), host.WrapDoc(c.help, 78))
				return true
			}
		}
		return false
	}
	// A name the user bound wins over the builtin it shadows.
	if v, ok := s.globals[name]; ok && s.userBound(name) {
		s.helpValue(w, name, v)
		return true
	}
	if b, ok := builtins.Lookup(name); ok {
		fmt.Fprintf(w, "%s\n\n%s", b.Sig, host.WrapDoc(b.Doc, 78))
		return true
	}
	var members []host.Builtin
	for _, b := range builtins.All() {
		if strings.HasPrefix(b.Name, name+".") {
			members = append(members, b)
		}
	}
	if len(members) > 0 {
		fmt.Fprintf(w, "module %s:\n", name)
		for _, b := range members {
			fmt.Fprintf(w, "  %s\n      %s\n", b.Sig, b.Summary())
		}
		return true
	}
	for _, x := range s.stdlibExports() {
		if x.Name == name {
			s.helpExport(w, x)
			return true
		}
	}
	if v, ok := s.globals[name]; ok && (s.userBound(name) || starlark.Universe[name] == nil) {
		s.helpValue(w, name, v)
		return true
	}
	if _, ok := starlark.Universe[name]; ok {
		fmt.Fprintf(w, "%s is a Starlark built-in: see https://github.com/bazelbuild/starlark/blob/master/spec.md\n", name)
		return true
	}
	for _, k := range keywords {
		if k == name {
			fmt.Fprintf(w, "%s is a Starlark keyword: see https://github.com/bazelbuild/starlark/blob/master/spec.md\n", name)
			return true
		}
	}
	// A keyword of a builtin (fsdp_sync_each_batch) or a field of what one
	// returns (device_used), as memsh doc finds them.
	return host.KeywordDoc(w, name, builtins.All(), ":help ")
}

// helpValue describes a global: a function's signature and docstring, or
// a value's type and attributes.
func (s *Session) helpValue(w io.Writer, name string, v starlark.Value) {
	if fn, ok := v.(*starlark.Function); ok {
		// A function loaded from the stdlib reads as :help shows it
		// before the load.
		for _, x := range s.stdlibExports() {
			if x.Name == fn.Name() && x.Module == fn.Position().Filename() {
				s.helpExport(w, x)
				return
			}
		}
		fmt.Fprintf(w, "%s\n", funcSig(fn))
		if doc := dedent(fn.Doc()); doc != "" {
			fmt.Fprintf(w, "\n%s\n", doc)
		}
		return
	}
	fmt.Fprintf(w, "%s: %s\n", name, v.Type())
	if ha, ok := v.(starlark.HasAttrs); ok {
		if names := ha.AttrNames(); len(names) > 0 {
			fmt.Fprintf(w, "\nattributes:\n%s", fill(names, "  ", "  ", 78))
		}
	}
}

// helpExport documents a stdlib name: how to load it, its signature and
// its docstring.
func (s *Session) helpExport(w io.Writer, x lang.Export) {
	fmt.Fprintf(w, "load(%q, %q)\n\n%s\n", x.Module, x.Name, x.Sig)
	if x.Doc != "" {
		fmt.Fprintf(w, "\n%s\n", x.Doc)
	}
}

// dedent trims a docstring and removes the indentation its lines after
// the first share.
func dedent(doc string) string {
	lines := strings.Split(strings.TrimSpace(doc), "\n")
	indent := -1
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " \t")); indent < 0 || n < indent {
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

// helpTopics lists every name :help knows, for did-you-mean.
func (s *Session) helpTopics() []string {
	var t []string
	for _, c := range commands() {
		if !c.hidden {
			t = append(t, ":"+c.name)
		}
	}
	for _, b := range builtins.All() {
		t = append(t, b.Name)
	}
	for _, x := range s.stdlibExports() {
		t = append(t, x.Name)
	}
	t = append(t, host.FieldNames(builtins.All())...)
	for k := range s.globals {
		t = append(t, k)
	}
	sort.Strings(t)
	return t
}

// funcSig renders a Starlark function's signature: "f(a, b=1, *args, c, **kw)".
func funcSig(fn *starlark.Function) string {
	np, nk := fn.NumParams(), fn.NumKwonlyParams()
	named := np
	if fn.HasVarargs() {
		named--
	}
	if fn.HasKwargs() {
		named--
	}
	param := func(i int) string {
		name, _ := fn.Param(i)
		if d := fn.ParamDefault(i); d != nil {
			return name + "=" + d.String()
		}
		return name
	}
	var parts []string
	for i := 0; i < named-nk; i++ {
		parts = append(parts, param(i))
	}
	if fn.HasVarargs() {
		name, _ := fn.Param(named)
		parts = append(parts, "*"+name)
	} else if nk > 0 {
		parts = append(parts, "*")
	}
	for i := named - nk; i < named; i++ {
		parts = append(parts, param(i))
	}
	if fn.HasKwargs() {
		name, _ := fn.Param(np - 1)
		parts = append(parts, "**"+name)
	}
	return fn.Name() + "(" + strings.Join(parts, ", ") + ")"
}

// fill lays out words, separated by sep, in lines of at most width
// columns, each starting with indent.
func fill(words []string, indent, sep string, width int) string {
	var b strings.Builder
	line := indent
	for _, w := range words {
		if line != indent && len(line)+len(sep)+len(w) > width {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = indent
		}
		if line != indent {
			line += sep
		}
		line += w
	}
	if line != indent {
		b.WriteString(line + "\n")
	}
	return b.String()
}
