// Command memsh simulates the GPU memory (and time) of one training step
// from models, training plans and hardware described in Starlark.
//
// Usage:
//
//	memsh run FILE.star [ARGS...]   run a script; ARGS reach it as argv
//	memsh test [DIR|FILE.star...]   compare each script's output with its x.golden
//	memsh plot FILE.star [ARGS...]  draw the memory timelines of its reports (SVG)
//	memsh doc [NAME]                list builtins and stdlib names, or document one
//	                                (a builtin, a stdlib name, a keyword or a report field)
//	memsh version                   print the version (also --version, -V)
//	memsh help                      print help
//
// Flags, before or after the command: --max-steps N (default 100000000),
// --timeout DURATION (a wall-clock limit per script for run, test and
// plot; default none) and --color=auto|always|never (auto colours a
// terminal unless NO_COLOR is set). Output flags: run --json (emitted values as JSON lines,
// docs/json.md), --csv (emitted tables as CSV), --plot OUT.svg and --snapshot OUT.pickle; test --update; plot -o OUT, --html and --report N|all;
// doc --markdown. Exit status: 0 success, 1 script error (or a failed
// test), 2 usage error, 130 interrupted.
//
// cmd/memsh is a thin layer of flags, I/O and exit codes over packages
// lang and builtins; it holds no evaluation logic.
package main
