// Package lang is the memsh Starlark host: the dialect (FileOptions), the
// Interpreter that runs scripts with the memsh builtins predeclared,
// load() of "@stdlib//x.star" modules (embedded, package stdlib) and of
// files relative to the loading file inside the script's folder tree, a
// module cache with cycle detection, a step limit, cancellation through a
// context, and FormatError, which renders any error a run returns as
//
//	file:line:col: error: message
//	    3 | g = gpu("H300")
//	      |        ^
//	  traceback (most recent call last):
//	    ...
//	  hint: ...
//
// # Threads and modules
//
// A run uses one starlark.Thread: loaded modules execute on the thread of
// the load statement, so they share its step budget, cancellation and
// State, and an error inside a loaded file has a traceback through the
// load. Each module executes once per Interpreter; its globals are frozen
// and cached.
//
// # Files
//
// Module names and error positions use paths as the user gave them, with
// forward slashes: "examples/lib.star", "@stdlib//units.star". Files are
// read through an os.Root on the script's folder, so no load (or builtin
// reading a file) can leave that tree, symlinks included.
//
// # The REPL
//
// lang/repl builds on Globals, ExecSource (or ExecChunk/EvalExpr for
// chunks it parsed itself with REPLFileOptions), AddSource and
// FormatError.
//
// # Tests
//
// lang/langtest runs in-process Starlark goldens (txtar archives with a
// main.star and expected stdout and stderr), for lang/testdata and for
// other packages' testdata alike.
//
// lang imports go.starlark.net, builtins and stdlib. It must not import
// readline or colour libraries (its colour is a few ANSI codes), nor sim
// beyond reading *sim.Error.
//
// Not a stable API: it exists for the memsh command.
package lang
