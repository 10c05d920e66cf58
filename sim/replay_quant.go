package sim

// quantParam allocates a quantized weight's storage in setup (one
// allocation per state tensor, as bitsandbytes makes them) and reports
// whether p was quantized.
func (r *Replay) quantParam(p *ParamInfo) bool {
	if p.quant == "" {
		return false
	}
	for _, s := range quantStorage(p.quant, p.shape) {
		r.allocate(Alloc{Tensor: p.Name + " " + s.name, Shape: p.shape, DType: quantDType(p.quant), Bytes: s.bytes, Why: p.quant + " quantized frozen weight (" + s.name + ")", Cat: CatParams})
		r.rep.States.Params += s.bytes
	}
	return true
}
