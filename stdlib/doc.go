// Package stdlib holds memsh's Starlark standard library, embedded in the
// binary and loaded by scripts as load("@stdlib//units.star", "to_gib").
//
// A module is a file at the root. llm.star, the model zoo, is split by kind
// of model into parts under llm/ (dense.star, moe.star, mla.star,
// gemma4.star, encoder.star, vision.star; common.star their shared
// helpers): llm.star loads each model from its part and binds it again,
// so load("@stdlib//llm.star", NAME) gives every model, and memsh doc
// (lang.StdlibExports) shows it with its part's signature and docstring.
// A new model goes in its part and gets one line in llm.star
// (TestStdlibPartsExported fails a part's model that llm.star leaves out).
//
// Modules are pure: they define functions and constants and print nothing
// when loaded. stdlib contains no Go logic beyond the embed; it imports
// nothing but embed.
//
// Not a stable API: it exists for the memsh command.
package stdlib
