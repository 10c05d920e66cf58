// Package importers reads the configs trainers run (torchtune recipes,
// torchtitan job files and Python configs, Hugging Face TrainingArguments, DeepSpeed configs,
// Megatron-LM and ms-swift command lines, anemoi-training's Hydra configs) as those
// trainers read them, with their defaults where a key is absent, and
// writes the memsh plan of the same job as a Starlark script: the script a
// user could have written, which memsh check runs (and --emit-star
// prints). Every key of a config is read, declared of no effect on memory
// (paths, logging, learning rates), listed as understood but not
// modelled, or listed as not understood: none is dropped silently. A
// config that cannot become a plan (malformed, of an unknown version,
// contradictory) is an *Error naming its key and line.
//
// The package writes Starlark text and runs none: it imports no Starlark
// interpreter and no engine package, so an importer's result is always a
// script. A job script (Megatron-LM's) is read by a bash interpreter that
// runs no command, reads no file and writes none (shell.go).
//
// torchtitan's Python configs (torchtitan_py*.go) are read with
// go.starlark.net/syntax, Starlark's parser only: Starlark's grammar is a
// subset of Python's, which covers config functions of constructor calls
// and attribute assignments once a documented line-for-line rewrite
// removes what it lacks (imports, annotations, assert, is None:
// torchtitan_py_read.go). A hand-written Python parser would reimplement
// one badly; running the file would need Python and torchtitan. The
// config function is evaluated by a small walker over the syntax tree
// (torchtitan_py_eval.go) against stand-ins of torchtitan's config
// classes with their fields and defaults (torchtitan_py_classes.go): the
// evaluation of a config tree, not of a program, so the interpreter
// (go.starlark.net/starlark, resolve) stays out, as
// cmd/memsh/layering_test.go checks.
package importers
