package hf

import "encoding/json"

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

// ropePerType checks rope_parameters where config.json sets it for a
// model whose rotary embedding (cls) makes one table a layer type from
// rope_parameters[type] (LFM3's, Mellum's, transformers 5.25.0): an entry
// for each type in used (a flat rope_parameters fails with a KeyError),
// and a table as wide as the head, which the model's
// apply_rotary_pos_emb needs (it multiplies the whole head, with no cat
// of passed dims). The rope types in headWide make a head-wide table
// whatever partial_rotary_factor says ("proportional" zeroes the
// frequencies of the dims it passes; LFM3's own "default" ignores the
// factor); any other narrows it to int(head_dim x factor), which
// apply_rotary_pos_emb cannot broadcast over the head (a RuntimeError):
// a factor below 1 there is refused.
func (c *hfConfig) ropePerType(cls string, used []string, headWide ...string) {
	raw, set := c.raw["rope_parameters"]
	if !set || raw == nil {
		return
	}
	rp, ok := raw.(map[string]any)
	if !ok {
		c.fail("rope_parameters", "must map each attention layer type to its rope parameters (got %s)", describeJSON(raw))
		return
	}
	for _, k := range used {
		p, ok := rp[k].(map[string]any)
		if !ok {
			c.fail("rope_parameters", "has no %q entry: %s reads rope_parameters[layer_type] for each attention layer type", k, cls)
			return
		}
		typ, _ := p["rope_type"].(string)
		wide := false
		for _, w := range headWide {
			wide = wide || typ == w
		}
		v, set := p["partial_rotary_factor"]
		if wide || !set || v == nil {
			continue
		}
		n, ok := v.(json.Number)
		if f, err := n.Float64(); !ok || err != nil || f != 1 {
			c.fail("rope_parameters", "%s's partial_rotary_factor (%s) with rope_type %q gives a table narrower than the head, which the model's apply_rotary_pos_emb cannot apply",
				k, describeJSON(v), typ)
			return
		}
	}
}
