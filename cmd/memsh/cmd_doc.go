package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/stdlib"
)

// cmdDoc lists builtins and stdlib names, or documents one:
// memsh doc [NAME].
func (e *env) cmdDoc(operands []string) error {
	exports, err := lang.StdlibExports(stdlib.FS)
	if err != nil {
		return err
	}
	if e.out.markdown {
		if len(operands) > 0 {
			return usagef("doc --markdown documents every name (got %q)", operands[0])
		}
		return writeMarkdown(e.stdout, builtins.All(), exports)
	}
	switch len(operands) {
	case 0:
		listDocs(e.stdout, builtins.All(), exports)
		return nil
	case 1:
	default:
		return usagef("doc takes one name (got %d)", len(operands))
	}
	name := operands[0]
	if b, ok := builtins.Lookup(name); ok {
		fmt.Fprintf(e.stdout, "%s\n\n%s", b.Sig, host.WrapDoc(b.Doc, 78))
		return nil
	}
	for _, x := range exports {
		if x.Name == name {
			fmt.Fprintf(e.stdout, "load(%q, %q)\n\n%s\n", x.Module, x.Name, x.Sig)
			if x.Doc != "" {
				fmt.Fprintf(e.stdout, "\n%s\n", x.Doc)
			}
			return nil
		}
	}
	if host.KeywordDoc(e.stdout, name, builtins.All(), "memsh doc ") {
		return nil
	}
	var names []string
	for _, b := range builtins.All() {
		names = append(names, b.Name)
	}
	for _, x := range exports {
		names = append(names, x.Name)
	}
	names = append(names, host.FieldNames(builtins.All())...)
	if h := builtins.AliasHint(name); h != "" {
		return usagef("no builtin or stdlib name %q: %s", name, h)
	}
	if near := nearNames(name, names); len(near) > 0 {
		return usagef("no builtin or stdlib name %q (did you mean %s?)", name, strings.Join(near, ", "))
	}
	return usagef("no builtin or stdlib name %q (memsh doc lists them)", name)
}

func listDocs(w io.Writer, bs []host.Builtin, exports []lang.Export) {
	width := 0
	for _, b := range bs {
		width = max(width, len(b.Name))
	}
	for _, x := range exports {
		width = max(width, len(x.Name))
	}
	width = min(width, 16)
	fmt.Fprintln(w, "Builtins (memsh doc NAME for details):")
	for _, b := range bs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, b.Name, b.Summary())
	}
	module := ""
	for _, x := range exports {
		if x.Module != module {
			module = x.Module
			fmt.Fprintf(w, "\n%s (load(%q, NAME)):\n", module, module)
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, x.Name, firstSentence(x.Doc))
	}
}

func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return s
}

// nearNames returns names equal to name but for case, or containing it,
// or contained in it, at most four.
func nearNames(name string, names []string) []string {
	q := strings.ToLower(name)
	var near []string
	seen := map[string]bool{}
	for _, n := range names {
		l := strings.ToLower(n)
		if seen[n] || q == "" {
			continue
		}
		if l == q || strings.Contains(l, q) || (len(l) >= 3 && strings.Contains(q, l)) {
			near = append(near, n)
			seen[n] = true
		}
	}
	sort.Strings(near)
	if len(near) > 4 {
		near = near[:4]
	}
	return near
}
