// Package repl will hold the memsh REPL: a core over a LineReader
// interface (readline on a TTY, plain lines for pipes and tests),
// completion and :commands, built on lang.Interpreter's Globals,
// ExecSource/ExecChunk/EvalExpr, AddSource and FormatError.
//
// It is an empty placeholder until the REPL issue lands. It may import
// lang, builtins, chzyer/readline and fatih/color; it must hold no
// simulation logic.
//
// Not a stable API: it exists for the memsh command.
package repl
