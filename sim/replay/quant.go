package replay

import "github.com/memsh/memsh/sim/core"

// quantParam allocates a quantized weight's storage in setup (one
// allocation per state tensor, as bitsandbytes makes them) and reports
// whether p was quantized.
func (r *Replay) quantParam(p *core.ParamInfo) bool {
	if p.Quant == "" {
		return false
	}
	for _, s := range core.QuantStorage(p.Quant, p.Shape) {
		r.allocate(Alloc{Tensor: p.Name + " " + s.Name, Shape: p.Shape, DType: core.QuantDType(p.Quant), Bytes: s.Bytes, Why: p.Quant + " quantized frozen weight (" + s.Name + ")", Cat: core.CatParams})
		r.Rep.States.Params += s.Bytes
	}
	return true
}
