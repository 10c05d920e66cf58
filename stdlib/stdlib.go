package stdlib

import "embed"

// FS holds every *.star module at its root.
//
//go:embed *.star
var FS embed.FS
