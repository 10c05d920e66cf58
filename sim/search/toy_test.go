package search

import "github.com/memsh/memsh/sim/core"

// toyContext is the CUDA context the search tests' toy cards (an H100
// shrunk to a few GiB, so that the memory bound prunes) were sized
// against: the 500 MiB the H100 held on every runtime before the current
// stack took the H200's measured 766.8 MiB (hw/catalog.go, gh100Context).
// A toy card keeps it, so that a context measured on a real card does not
// move which layouts fit on a made-up one.
const toyContext = 500 << 20

// toyMemory shrinks p's card to memory bytes, with toyContext for every
// runtime.
func toyMemory(p *core.Plan, memory int64) {
	p.Device = p.Device.WithContext(toyContext)
	p.Device.Memory = memory
}
