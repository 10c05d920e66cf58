// Package repl is the memsh REPL: a core (Session) over a LineReader, so
// the same code runs at a terminal (Terminal, over chzyer/readline) and
// over pipes and tests (PlainReader: no prompt, no colour).
//
// # Input
//
// Multi-line input is decided by the parser: a def, for or if with its
// body, open brackets and triple-quoted strings continue on the next line
// ("... " prompt, indentation carried over); a blank line ends a block.
// Each statement runs as a chunk named "<stdin:N>" whose text the
// interpreter keeps, so errors quote it even from a function defined
// earlier. A sole expression prints its value (through
// builtins.Renderer when the value implements it, else String) and binds
// _.
//
// # Commands
//
// :help [NAME], :vars, :type EXPR, :load FILE, :paste, :reset, :history
// and :quit; a unique prefix works (:q). The hidden :complete TEXT prints
// what Tab would offer, for tests.
//
// # Completion, history, interrupts
//
// Complete offers globals, builtins and keywords; attributes after "x."
// (through AttrNames, calling no function); name= for the parameters of
// the call around the cursor (a builtin's Sig, a Starlark function's
// parameters); @stdlib// paths and exported names inside load().
// History keeps one entry per complete statement in HistoryPath. Ctrl-C
// at the prompt drops the statement being typed; during a statement
// (Options.Interrupt) it cancels the thread and the session goes on.
//
// The package imports lang, builtins (docs), stdlib and chzyer/readline;
// it holds no simulation logic. Not a stable API: it exists for the memsh
// command.
package repl
