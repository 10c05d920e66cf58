package stdlib

import "embed"

// FS holds every *.star module at its root and the parts of llm.star
// (llm/*.star), which llm.star loads.
//
//go:embed *.star llm/*.star
var FS embed.FS
