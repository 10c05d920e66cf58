// Package builtins is memsh's Starlark language: the registry that
// predeclares every builtin (All, Predeclared, Lookup), emit() and expect(),
// and the JSON documents of emitted values. The builtins themselves live in
// packages by concept, each over the engine's values:
//
//   - builtins/host: what they all share: the per-run State, Builtin,
//     script positions and errors, numbers, units, dtypes, colour;
//   - builtins/models: layers, models, hf_config, graph models, tables;
//   - builtins/plans: train() and its options (precision, optimizers,
//     checkpointing, LoRA, offload, parallel layouts, GPUs);
//   - builtins/reports: simulate() and the report value, its fields
//     (report_fields.go) and rendering;
//   - builtins/tables: sweep(), search() and the result table value.
//
// # Adding builtins
//
// A file of builtins defines one table and adds one line to
// builtinTables() in registry.go:
//
//	// layers.go
//	func layerBuiltins() []Builtin {
//		return []Builtin{{
//			Name: "linear",
//			Sig:  "linear(in_features, out_features, bias=False)",
//			Doc:  "A fully connected layer. ...",
//			Fn:   linear,
//		}}
//	}
//
//	// registry.go, in builtinTables():
//	models.LayerBuiltins(),
//
// Name is the user-visible name; a dotted name ("optim.adamw") makes a
// member of a module value "optim" (add an entry named "optim" with only a
// Sig and Doc to document the module). Sig starts with the name and reads
// as a Starlark call (alternatives as impl="flash"|"eager" and "..." are
// allowed; registry_test.go parses it); the first
// sentence of Doc is the one-line summary that `memsh doc` lists. An entry
// has exactly one of Fn (a function) or Value (a constant or module value,
// which must be immutable: tables are shared by every run).
//
// Predeclared wraps every Fn once, turning a Go panic into the error
// "internal error in NAME: ...". Ordinary errors should not repeat the
// builtin's name: the traceback names it already. Errors are lower-case,
// name the offending value and the expected domain, and may be a *sim.Error
// (WithOrigin adds the declaration position a constructor recorded with
// CallerPos).
//
// Per-run state (output, colour, file access, context) is a *State set on
// the thread by package lang; builtins reach it with StateOf(thread).
//
// The builtins packages import sim and go.starlark.net. They must not import lang,
// mutate starlark.Universe, or keep package-level mutable state.
//
// Not a stable API: it exists for the memsh command.
package builtins
