// Package stdlib holds memsh's Starlark standard library, embedded in the
// binary and loaded by scripts as load("@stdlib//units.star", "to_gib").
//
// Modules are pure: they define functions and constants and print nothing
// when loaded. stdlib contains no Go logic beyond the embed; it imports
// nothing but embed.
//
// Not a stable API: it exists for the memsh command.
package stdlib
