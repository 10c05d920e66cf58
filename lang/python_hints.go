package lang

import "strings"

// Python's habits in a script: names Starlark lacks and syntax it does not
// have, each with the way memsh writes it. A Python user's first script
// often has an f-string or a sum(); the bare parser message ("got string
// literal, want ','") or a "did you mean" for a nearby builtin ("exit" ->
// "emit") does not say what to write instead.

// pythonNameHint is the hint for an undefined name that is a Python
// builtin Starlark lacks, or "".
func pythonNameHint(name string) string {
	switch name {
	case "sum":
		return "Starlark has no sum(): add in a loop (total = 0, then for x in xs: total += x)"
	case "round":
		return `Starlark has no round(): math.round(x) rounds to a whole number (a float), format(x, ".2f") writes two decimals`
	case "pow":
		return "Starlark has no pow(): math.pow(x, y), or 1 << n for a power of two"
	case "divmod":
		return "Starlark has no divmod(): x // y and x % y"
	case "isinstance":
		return `Starlark has no isinstance(): type(x) == "int" (type() returns the type's name)`
	case "exit", "quit":
		return `a script ends at its last line; fail("why") stops it with an error`
	case "help":
		return "memsh doc NAME documents a name (:help NAME in the REPL)"
	}
	return ""
}

// pythonSyntaxHint is the hint for a parser or runtime message that
// Python's syntax or formatting explains, or "".
func pythonSyntaxHint(msg string) string {
	switch {
	case strings.Contains(msg, "got string literal, want"):
		return `Starlark has no f-strings and does not join adjacent strings: write "x is %s" % x, "x is {}".format(x), format(x, ".2f") or "a" + "b"`
	case strings.Contains(msg, "got import, want"):
		return `Starlark has no import: load("@stdlib//llm.star", "llama") loads names from the stdlib or a file (json and math need none)`
	case strings.Contains(msg, "got is, want"):
		return "Starlark has no 'is': compare with == and != (x != None)"
	case strings.Contains(msg, "got '**', want"):
		return "Starlark has no ** operator: math.pow(x, y), or 1 << n for a power of two"
	case strings.Contains(msg, "got class, want"):
		return "Starlark has no classes: a dict, or a function that returns one"
	case strings.Contains(msg, "got try, want"):
		return `Starlark has no exceptions: an error stops the script, so check the value first (fail("why") stops it on purpose)`
	case strings.HasPrefix(msg, "unknown conversion %"), strings.Contains(msg, "format spec features not supported"):
		return `Starlark's % and str.format take no width or precision: format(x, ".2f") formats a value by Python's format spec`
	}
	return ""
}
