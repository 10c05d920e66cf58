// Package langtest runs in-process Starlark goldens: txtar archives whose
// main.star (with any other files beside it) runs through lang, and whose
// "stdout" and "stderr" sections hold what it prints and the formatted
// error. MEMSH_UPDATE=1 go test ./... rewrites those sections; review the
// diff before committing.
//
//	# fmt_bytes renders the failing allocation of SEEDS.md story 1
//	-- main.star --
//	print(fmt_bytes(2 * 1359281 * 1024 * 4))
//	-- stdout --
//	10.37 GiB
//
// An "args" section gives argv, one argument per line. Packages call Run
// from a test (builtins does so from an external test package, since
// lang imports builtins).
//
// Not a stable API: it exists for memsh's tests.
package langtest
