// Package jsondoc defines the JSON documents memsh writes for other tools:
// `memsh run --json` writes one Doc per line on stdout, one for each value
// the script passes to emit() or returns from main(). docs/json.md
// documents the schema for users; the types here are its Go form, for Go
// programs that decode memsh output.
//
// Memory figures are ints of bytes, times are float seconds, and the field
// names are those of the report attributes in Starlark (r.peak_allocated
// is "peak_allocated"), which r.as_dict() also uses. Version changes only
// when a field is removed or changes meaning; new fields may appear at any
// time, so decoders should ignore fields they do not know.
//
// jsondoc imports only the standard library.
package jsondoc
