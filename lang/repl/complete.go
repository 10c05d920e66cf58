package repl

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins"
	"go.starlark.net/starlark"
)

// CompleteLine completes the line being typed, up to the cursor, in the
// context of the lines of the statement typed before it. It returns whole
// words and the word before the cursor that each of them replaces (every
// candidate starts with it). The readline adapter calls it on Tab.
func (s *Session) CompleteLine(line string) (cands []string, word string) {
	if len(s.pending) == 0 {
		return s.Complete(line)
	}
	return s.completeCode(strings.Join(s.pending, "\n") + "\n" + line)
}

// Complete completes text as typed at the primary prompt: a :command, or
// Starlark. It offers
//   - at the start of a word: globals, builtins and keywords;
//   - after "x.": the attributes of x (walking a dotted path with Attr,
//     never calling a function);
//   - inside a call f(...: name= for each parameter of f not given yet,
//     from the builtin's Sig or the Starlark function's parameters;
//   - inside load("...": the @stdlib// module paths, then the names the
//     module exports.
func (s *Session) Complete(text string) (cands []string, word string) {
	t := strings.TrimLeft(text, " \t")
	if !strings.HasPrefix(t, ":") {
		return s.completeCode(text)
	}
	name, arg, hasArg := strings.Cut(t[1:], " ")
	if !hasArg {
		for _, c := range commands() {
			if !c.hidden && strings.HasPrefix(c.name, name) {
				cands = append(cands, ":"+c.name)
			}
		}
		return cands, ":" + name
	}
	arg = strings.TrimLeft(arg, " \t")
	switch name {
	case "help":
		for _, n := range s.helpTopics() {
			if strings.HasPrefix(n, arg) {
				cands = append(cands, n)
			}
		}
		return dedupe(cands), arg
	case "type":
		return s.completeCode(arg)
	case "load":
		return completeFile(arg), arg
	}
	return nil, ""
}

var (
	wordRE   = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\.?$|[A-Za-z_][A-Za-z0-9_]*$|$`)
	calleeRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\s*$`)
	kwargRE  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*=([^=]|$)`)
)

// completeCode completes the Starlark text before the cursor.
func (s *Session) completeCode(text string) ([]string, string) {
	lx := scan(text)
	if lx.inComment {
		return nil, ""
	}
	if lx.inString {
		return s.completeString(text, lx)
	}
	word := wordRE.FindString(text)
	if word != "" && word[0] >= '0' && word[0] <= '9' {
		return nil, ""
	}
	// A word right after a '.' that follows something other than a name
	// ("f().x", "'s'.up") belongs to a value we would have to compute.
	if start := len(text) - len(word); start > 0 && text[start-1] == '.' {
		return nil, ""
	}
	if i := strings.LastIndexByte(word, '.'); i >= 0 {
		return s.completeAttr(word[:i], word[i+1:]), word[i+1:]
	}
	var cands []string
	if n := len(lx.open); n > 0 && text[lx.open[n-1]] == '(' {
		open := lx.open[n-1]
		if callee := calleeRE.FindString(text[:open]); callee != "" && !isKeyword(strings.TrimSpace(callee)) {
			given := map[string]bool{}
			for _, m := range kwargRE.FindAllStringSubmatch(text[open+1:len(text)-len(word)], -1) {
				given[m[1]] = true
			}
			for _, p := range s.params(strings.TrimSpace(callee)) {
				if strings.HasPrefix(p, word) && !given[p] {
					cands = append(cands, p+"=")
				}
			}
		}
	}
	if word == "" {
		return cands, ""
	}
	var names []string
	add := func(n string) {
		if strings.HasPrefix(n, word) && (!strings.HasPrefix(n, "_") || strings.HasPrefix(word, "_")) {
			names = append(names, n)
		}
	}
	for n := range s.globals {
		add(n)
	}
	for n := range starlark.Universe {
		add(n)
	}
	for _, k := range keywords {
		add(k)
	}
	sort.Strings(names)
	return append(cands, dedupe(names)...), word
}

// completeAttr offers the attributes of the value at the dotted path
// base that start with partial.
func (s *Session) completeAttr(base, partial string) []string {
	v := s.lookup(base)
	ha, ok := v.(starlark.HasAttrs)
	if !ok {
		return nil
	}
	var cands []string
	for _, n := range safeAttrNames(ha) {
		if strings.HasPrefix(n, partial) && (!strings.HasPrefix(n, "_") || strings.HasPrefix(partial, "_")) {
			cands = append(cands, n)
		}
	}
	sort.Strings(cands)
	return dedupe(cands)
}

// lookup finds the value at a dotted path of globals and attributes; nil
// when there is none. It reads attributes and never calls a function.
func (s *Session) lookup(dotted string) starlark.Value {
	parts := strings.Split(dotted, ".")
	v, ok := s.globals[parts[0]]
	if !ok {
		v, ok = starlark.Universe[parts[0]]
	}
	if !ok {
		return nil
	}
	for _, p := range parts[1:] {
		ha, ok := v.(starlark.HasAttrs)
		if !ok {
			return nil
		}
		if v = safeAttr(ha, p); v == nil {
			return nil
		}
	}
	return v
}

// safeAttr reads an attribute, treating an error or a panic as absence:
// completion must never break the session.
func safeAttr(ha starlark.HasAttrs, name string) (v starlark.Value) {
	defer func() {
		if recover() != nil {
			v = nil
		}
	}()
	v, err := ha.Attr(name)
	if err != nil {
		return nil
	}
	return v
}

func safeAttrNames(ha starlark.HasAttrs) (names []string) {
	defer func() {
		if recover() != nil {
			names = nil
		}
	}()
	return ha.AttrNames()
}

// params returns the parameter names that callee (a dotted path) accepts
// as keywords: from a memsh builtin's Sig, or a Starlark function's
// parameters (neither *args nor **kwargs).
func (s *Session) params(callee string) []string {
	switch fn := s.lookup(callee).(type) {
	case *starlark.Function:
		n := fn.NumParams()
		if fn.HasVarargs() {
			n--
		}
		if fn.HasKwargs() {
			n--
		}
		names := make([]string, 0, n)
		for i := 0; i < n; i++ {
			name, _ := fn.Param(i)
			names = append(names, name)
		}
		return names
	case *starlark.Builtin:
		if fn.Receiver() != nil {
			return nil
		}
		if b, ok := builtins.Lookup(fn.Name()); ok {
			return sigParams(b.Sig)
		}
	}
	return nil
}

// sigParams returns the named parameters of a signature such as
// `mlp(dim, hidden, act="gelu", *, name=None)`.
func sigParams(sig string) []string {
	i, j := strings.IndexByte(sig, '('), strings.LastIndexByte(sig, ')')
	if i < 0 || j < i {
		return nil
	}
	var names []string
	for _, p := range splitTop(sig[i+1 : j]) {
		p = strings.TrimSpace(p)
		if name, _, _ := strings.Cut(p, "="); isIdent(strings.TrimSpace(name)) {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

// splitTop splits s at the commas that are outside brackets and strings.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case c == '"' || c == '\'':
			quote = c
		case strings.IndexByte("([{", c) >= 0:
			depth++
		case strings.IndexByte(")]}", c) >= 0:
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func isIdent(s string) bool {
	if s == "" || isKeyword(s) {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func isKeyword(s string) bool {
	for _, k := range keywords {
		if k == s {
			return true
		}
	}
	return false
}

var (
	loadModuleRE = regexp.MustCompile(`(^|[^A-Za-z0-9_.])load\s*\(\s*$`)
	loadNameRE   = regexp.MustCompile(`(^|[^A-Za-z0-9_.])load\s*\(\s*("[^"]*"|'[^']*')\s*,[^()]*$`)
)

// completeString completes inside a string literal: a module path as the
// first argument of load, or a name the module exports as a later one.
func (s *Session) completeString(text string, lx lexState) ([]string, string) {
	partial := text[lx.strStart+lx.quoteLen:]
	before := text[:lx.strStart]
	var cands []string
	switch {
	case loadModuleRE.MatchString(before):
		// The modules, at the stdlib's root; a folder holds a module's
		// parts (llm/*.star), which users load through the module.
		entries, _ := fs.ReadDir(s.opts.Stdlib, ".")
		for _, e := range entries {
			if !e.IsDir() && path.Ext(e.Name()) == ".star" {
				if m := "@stdlib//" + e.Name(); strings.HasPrefix(m, partial) {
					cands = append(cands, m)
				}
			}
		}
	case loadNameRE.MatchString(before):
		m := loadNameRE.FindStringSubmatch(before)
		module, err := strconv.Unquote(`"` + m[2][1:len(m[2])-1] + `"`)
		if err != nil {
			return nil, ""
		}
		for _, x := range s.stdlibExports() {
			if x.Module == module && strings.HasPrefix(x.Name, partial) {
				cands = append(cands, x.Name)
			}
		}
	default:
		return nil, ""
	}
	sort.Strings(cands)
	return cands, partial
}

// completeFile offers files and folders for :load, relative to the
// current folder: folders end in "/", files are .star scripts.
func completeFile(partial string) []string {
	dir, base := path.Split(filepath.ToSlash(partial))
	entries, err := os.ReadDir(filepath.FromSlash(orDot(dir)))
	if err != nil {
		return nil
	}
	var cands []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, base) || strings.HasPrefix(n, ".") && !strings.HasPrefix(base, ".") {
			continue
		}
		switch {
		case e.IsDir():
			cands = append(cands, dir+n+"/")
		case strings.HasSuffix(n, ".star"):
			cands = append(cands, dir+n)
		}
	}
	return cands
}

func orDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// lexState is where the text before the cursor stands: inside a string
// (and where it starts), and the open brackets (their offsets).
type lexState struct {
	inString  bool
	inComment bool // the text ends in a # comment
	strStart  int  // offset of the opening quote
	quoteLen  int  // 1, or 3 for a triple-quoted string
	open      []int
}

// scan walks Starlark text well enough for completion: strings (with
// escapes and triple quotes), comments and brackets.
func scan(text string) lexState {
	var lx lexState
	quote := ""
	for i := 0; i < len(text); i++ {
		c := text[i]
		if quote != "" {
			switch {
			case c == '\\':
				i++
			case strings.HasPrefix(text[i:], quote):
				i += len(quote) - 1
				quote = ""
				lx.inString = false
			case c == '\n' && len(quote) == 1:
				quote = "" // an unterminated string ends at the line
				lx.inString = false
			}
			continue
		}
		switch c {
		case '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			lx.inComment = i == len(text)
		case '"', '\'':
			quote = string(c)
			if strings.HasPrefix(text[i:], strings.Repeat(string(c), 3)) {
				quote = strings.Repeat(string(c), 3)
			}
			lx.inString, lx.strStart, lx.quoteLen = true, i, len(quote)
			i += len(quote) - 1
		case '(', '[', '{':
			lx.open = append(lx.open, i)
		case ')', ']', '}':
			if len(lx.open) > 0 {
				lx.open = lx.open[:len(lx.open)-1]
			}
		}
	}
	return lx
}
