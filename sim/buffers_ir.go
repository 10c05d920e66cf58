package sim

import "github.com/memsh/memsh/sim/units"

// bufferInfo is one module buffer on the device.
type bufferInfo struct {
	name  string
	shape []int64
	dtype units.DType
	why   string
}

// buffer registers a module buffer of the module being lowered.
func (b *builder) buffer(name string, shape []int64, dt units.DType, why string) {
	b.p.buffers = append(b.p.buffers, bufferInfo{name: b.name(name), shape: shape, dtype: dt, why: why})
}
