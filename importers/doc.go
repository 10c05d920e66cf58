// Package importers reads the configs trainers run (torchtune recipes,
// torchtitan job files, Hugging Face TrainingArguments, DeepSpeed configs,
// Megatron-LM command lines, anemoi-training's Hydra configs) as those
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
// and no engine package, so an importer's result is always a script. A
// job script (Megatron-LM's) is read by a bash interpreter that runs no
// command, reads no file and writes none (shell.go).
package importers
