// Package host is what every memsh builtin shares: the per-run State a
// script's threads carry (output, colour, file access, cancellation,
// progress), the Builtin entry the registry lists, script positions and
// how engine errors get them (WithOrigin, CallerPos), did-you-mean hints,
// conversions of Starlark numbers, byte units and dtypes, frozen values,
// colour (Paint) and doc wrapping.
//
// host imports the engine and go.starlark.net, and no other builtins
// package.
package host
