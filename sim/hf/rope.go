package hf

// The rotary embedding's tables as transformers makes them once a forward
// (nn.Attention.RopeTables): their width under partial rotary.

// rotaryFactor reads key, the share of each head the rotary embedding
// turns (partial_rotary_factor), def when absent: in (0, 1].
func (c *hfConfig) rotaryFactor(key string, def float64) float64 {
	f := c.number(key, def)
	if c.err == nil && (f <= 0 || f > 1) {
		c.fail(key, "must be in (0, 1] (got %g)", f)
	}
	return f
}

// ropeWidth is the width of the cos and sin tables of a head of hd
// dimensions of which factor turn: int(hd x factor) dimensions, whose
// inv_freq is arange(0, dim, 2) / dim, repeated once (emb = cat(freqs,
// freqs)): rounded up to even (_compute_default_rope_parameters,
// modeling_rope_utils.py, transformers 5.25.0).
func ropeWidth(hd int64, factor float64) int64 {
	dim := int64(float64(hd) * factor)
	return 2 * ((dim + 1) / 2)
}
