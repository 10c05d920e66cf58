package lang

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/fatih/color"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// ErrorFormat says how FormatError renders errors.
type ErrorFormat struct {
	// Sources gives file texts for excerpts; nil prints none.
	Sources SourceMap
	// Stdlib is searched for the module that exports an undefined name,
	// for the load() hint; nil means no such hints.
	Stdlib fs.FS
	// Color adds ANSI colour.
	Color bool
	// Names are the names in scope beside a file's own (the predeclared
	// ones, a REPL session's globals), for "did you mean" on an
	// undefined name.
	Names []string
}

// FormatError writes err as memsh reports errors: a "file:line:col: error:
// message" header, the source line with a caret, the traceback (when more
// than one Starlark frame is involved) or the load that reached a file
// with a syntax error, the declaration of the offending object for a
// *sim.Error ("declared at ..."), and a hint where one helps. It handles
// syntax errors, resolve error lists (all of them), Starlark evaluation
// errors (the innermost, through failed loads) and plain errors.
func FormatError(w io.Writer, err error, f ErrorFormat) {
	if err == nil {
		return
	}
	p := &printer{f: f}
	p.format(err)
	w.Write(p.buf.Bytes())
}

// FormatError formats err with the sources this interpreter ran and its
// stdlib for hints.
func (in *Interpreter) FormatError(w io.Writer, err error, color bool) {
	in.FormatErrorIn(w, err, color, nil)
}

// FormatErrorIn is FormatError for code run against globals (a REPL
// session's): their names are candidates for "did you mean" too.
func (in *Interpreter) FormatErrorIn(w io.Writer, err error, color bool, globals starlark.StringDict) {
	names := make([]string, 0, len(in.predeclared)+len(starlark.Universe)+len(globals))
	for _, d := range []starlark.StringDict{in.predeclared, starlark.Universe, globals} {
		for k := range d {
			names = append(names, k)
		}
	}
	FormatError(w, err, ErrorFormat{Sources: in, Stdlib: in.opts.Stdlib, Color: color, Names: names})
}

type printer struct {
	f   ErrorFormat
	buf bytes.Buffer
}

func (p *printer) style(style []color.Attribute, s string) string {
	return host.Paint(p.f.Color, style, s)
}

func (p *printer) format(err error) {
	var (
		evals []*starlark.EvalError // outermost first
		synt  *syntax.Error
		rlist resolve.ErrorList
		serr  *units.Error
	)
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch x := e.(type) {
		case *starlark.EvalError:
			evals = append(evals, x)
		case syntax.Error:
			synt = &x
		case *syntax.Error:
			synt = x
		case resolve.ErrorList:
			rlist = x
		}
	}
	errors.As(err, &serr)

	var loadStack starlark.CallStack // where the failing file was loaded from
	if len(evals) > 0 {
		loadStack = evals[len(evals)-1].CallStack
	}
	switch {
	case len(rlist) > 0:
		for _, e := range rlist {
			p.located(e.Pos, e.Msg)
			p.hint(e.Msg, p.nameHint(e.Msg, e.Pos)) // suggest_names.go
		}
		p.frames("loaded from", loadStack)
	case synt != nil:
		p.located(synt.Pos, synt.Msg)
		p.frames("loaded from", loadStack)
		p.hint(synt.Msg, "")
	case len(evals) > 0:
		inner := evals[len(evals)-1]
		msg := cleanMessage(inner.Msg)
		stack := starlarkFrames(inner.CallStack)
		at := ""
		if len(stack) > 0 {
			pos := stack[userFrame(stack)].Pos
			p.located(pos, msg)
			at = posString(pos)
		} else {
			p.plain(msg)
		}
		if len(stack) > 1 {
			p.frames("traceback (most recent call last)", stack)
		}
		p.simDetails(serr, at)
		p.hint(msg, simHint(serr))
	default:
		p.plain(cleanMessage(err.Error()))
		p.simDetails(serr, "")
		p.hint(err.Error(), simHint(serr))
	}
}

func (p *printer) plain(msg string) {
	fmt.Fprintf(&p.buf, "%s %s\n", p.style(host.StyleError, "error:"), escapeMessage(msg))
}

// located writes the header and the excerpt for pos.
func (p *printer) located(pos syntax.Position, msg string) {
	fmt.Fprintf(&p.buf, "%s %s %s\n", p.style(host.StyleBold, posString(pos)+":"), p.style(host.StyleError, "error:"), escapeMessage(msg))
	line, ok := p.sourceLine(pos)
	if !ok {
		return
	}
	num := fmt.Sprint(pos.Line)
	gutter := max(4, len(num))
	shown, pad := excerpt(line, int(pos.Col))
	fmt.Fprintf(&p.buf, " %*s %s %s\n", gutter, num, p.style(host.StyleDim, "|"), shown)
	fmt.Fprintf(&p.buf, " %*s %s %s%s\n", gutter, "", p.style(host.StyleDim, "|"), pad, p.style(host.StyleError, "^"))
}

// sourceLine returns line pos.Line of pos's file, if known.
func (p *printer) sourceLine(pos syntax.Position) (string, bool) {
	if p.f.Sources == nil || !pos.IsValid() || pos.Line < 1 {
		return "", false
	}
	src, ok := p.f.Sources.Source(pos.Filename())
	if !ok {
		return "", false
	}
	lines := strings.Split(string(src), "\n")
	if int(pos.Line) > len(lines) {
		return "", false
	}
	return strings.TrimRight(lines[pos.Line-1], "\r"), true
}

// frames writes a titled list of Starlark frames, outermost first.
func (p *printer) frames(title string, stack starlark.CallStack) {
	stack = starlarkFrames(stack)
	if len(stack) == 0 {
		return
	}
	fmt.Fprintf(&p.buf, "  %s:\n", title)
	for _, fr := range stack {
		fmt.Fprintf(&p.buf, "    %s in %s\n", posString(fr.Pos), fr.Name)
	}
}

// simDetails writes where the erring value was declared, unless that is
// where the error is shown (at): search(model, ...) declares its plan at
// the call, and the line repeated the header's position.
func (p *printer) simDetails(se *units.Error, at string) {
	if se != nil && se.Origin != "" && se.Origin != at {
		fmt.Fprintf(&p.buf, "  declared at %s\n", se.Origin)
	}
}

func (p *printer) hint(msg, given string) {
	h := given
	if h == "" {
		h = hintFor(msg, p.f.Stdlib)
	}
	if h != "" {
		fmt.Fprintf(&p.buf, "  %s %s\n", p.style(host.StyleCyan, "hint:"), h)
	}
}

func simHint(se *units.Error) string {
	if se == nil {
		return ""
	}
	return se.Hint
}

// starlarkFrames drops the frames of builtins (whose errors already name
// them) from stack.
func starlarkFrames(stack starlark.CallStack) starlark.CallStack {
	var out starlark.CallStack
	for _, fr := range stack {
		if fr.Pos.Filename() != "<builtin>" {
			out = append(out, fr)
		}
	}
	return out
}

// userFrame is the frame an evaluation error is shown at: the innermost
// in the user's own files. An error raised inside the standard library (a
// stdlib function's fail() on an argument it refuses) is the caller's to
// fix, so its header and excerpt are the call in the user's script; the
// traceback below still reaches the stdlib line that raised it. A stack
// wholly inside the standard library is shown at its innermost frame.
func userFrame(stack starlark.CallStack) int {
	for i := len(stack) - 1; i >= 0; i-- {
		if !strings.HasPrefix(stack[i].Pos.Filename(), stdlibPrefix) {
			return i
		}
	}
	return len(stack) - 1
}

func posString(pos syntax.Position) string {
	if !pos.IsValid() {
		return "<unknown>"
	}
	return fmt.Sprintf("%s:%d:%d", pos.Filename(), pos.Line, pos.Col)
}

// cleanMessage drops the interpreter's cancellation prefix, fail()'s
// prefix and a repeated "name: name: " prefix.
func cleanMessage(msg string) string {
	msg = strings.TrimPrefix(msg, "Starlark computation cancelled: ")
	msg = strings.TrimPrefix(msg, "fail: ") // fail("...") is the user's own message
	if i := strings.Index(msg, ": "); i > 0 {
		prefix := msg[:i+2]
		if !strings.ContainsAny(prefix[:i], " \n") && strings.HasPrefix(msg[i+2:], prefix) {
			msg = msg[i+2:]
		}
	}
	return msg
}
