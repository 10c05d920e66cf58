package repl

import (
	"regexp"
	"strings"
)

// pythonHabit reads a line typed as Python's REPL takes it as the
// :command it stands for, unless the session has bound the name itself:
// exit, exit(), quit and quit() leave (:quit); help and help() list the
// names (:help); help(NAME) documents NAME (:help NAME), NAME a name, a
// dotted name or either quoted. Starlark has none of these names, so such
// a line would only fail with "undefined".
func (s *Session) pythonHabit(line string) (name, arg string, ok bool) {
	t := strings.TrimSpace(line)
	callee, rest, called := strings.Cut(t, "(")
	callee = strings.TrimSpace(callee)
	if _, bound := s.globals[callee]; bound {
		return "", "", false
	}
	switch callee {
	case "exit", "quit":
		if !called || strings.TrimSpace(rest) == ")" {
			return "quit", "", true
		}
	case "help":
		if !called {
			return "help", "", true
		}
		inner, closed := strings.CutSuffix(strings.TrimSpace(rest), ")")
		inner = strings.Trim(strings.TrimSpace(inner), `"'`)
		if closed && (inner == "" || helpName.MatchString(inner)) {
			return "help", inner, true
		}
	}
	return "", "", false
}

// helpName is what help(NAME) takes: a name, or names joined by dots.
var helpName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
