package core

import "github.com/memsh/memsh/sim/units"

// bufferInfo is one module buffer on the device.
type bufferInfo struct {
	Name  string
	Shape []int64
	Dtype units.DType
	Why   string
}

// buffer registers a module buffer of the module being lowered.
func (b *Builder) Buffer(name string, shape []int64, dt units.DType, why string) {
	b.P.Buffers = append(b.P.Buffers, bufferInfo{Name: b.Name(name), Shape: shape, Dtype: dt, Why: why})
}
