package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// The keys a family reads the same way: head_dim, the key-value heads,
// the parameter total, attention dropout and the MLP's activation.

// headDim reads head_dim, or derives hidden/heads from the family's keys
// hiddenKey and headsKey (heads must divide hidden).
func (c *hfConfig) headDim(hiddenKey, headsKey string, def int64) int64 {
	if c.has("head_dim") {
		return c.intValue("head_dim", 1)
	}
	if def > 0 {
		return def
	}
	hidden, heads := c.size(hiddenKey), c.size(headsKey)
	if heads > 0 && hidden%heads != 0 && c.err == nil {
		c.err = &units.Error{
			Msg:  fmt.Sprintf("%q (%d) is not a multiple of %q (%d)", c.at(hiddenKey), hidden, c.at(headsKey), heads),
			Hint: fmt.Sprintf(`set "head_dim" in config.json when it is not %s / %s`, hiddenKey, headsKey),
		}
	}
	if heads == 0 {
		return 0
	}
	return hidden / heads
}

// kvHeads checks that kv divides heads.
func (c *hfConfig) kvHeads(key string, heads int64) int64 {
	kv := c.sizeOr(key, heads)
	if kv > 0 && heads%kv != 0 {
		c.fail(key, "(%d) must divide the %d attention heads", kv, heads)
	}
	return kv
}

// checkTotal rejects configs whose parameter count (estimated in float64
// from the sizes) is beyond any real model, so that counts and byte sizes
// (16 to 20 bytes a parameter in training) stay far from int64 overflow.
func (c *hfConfig) checkTotal(estimate float64) {
	if c.err == nil && estimate > 1e16 {
		c.err = &units.Error{Msg: fmt.Sprintf("config.json describes about %.3g parameters, more than memsh can count", estimate),
			Hint: "check the sizes in config.json"}
	}
}

// attnDropout maps the probabilities-dropout pa and the output dropout po
// of an attention block onto Attention.Dropout, which drops both with one
// probability: equal, or pa = 0 with a separate Dropout after the block,
// the module name (a path from the block) the model gives that dropout
// ("" for a functional one, no module).
func (c *hfConfig) attnDropout(paKey string, pa, po float64, name string) (float64, []core.Layer) {
	switch {
	case pa == po:
		return pa, nil
	case pa == 0:
		return 0, []core.Layer{&nn.Dropout{Name: name, P: po}}
	}
	if c.err == nil {
		c.err = &units.Error{
			Msg:  fmt.Sprintf("%q = %g with an output dropout of %g cannot be modelled yet", paKey, pa, po),
			Hint: "memsh drops attention probabilities and the attention output with one probability; set them equal or the first to 0",
		}
	}
	return 0, nil
}

// mlpAct maps a transformers activation name (ACT2FN) to an mlp act.
func (c *hfConfig) mlpAct(key, def string, gated bool) string {
	name := c.str(key, def)
	var fn string
	switch name {
	case "gelu", "gelu_pytorch_tanh":
		fn = "gelu" // one aten::gelu (tanh-approximated for the second)
	case "gelu_new", "gelu_accurate", "gelu_fast", "gelu_python", "quick_gelu":
		// transformers' Python-arithmetic GELUs (nn/gelu_python.go);
		// AccurateGELUActivation runs gelu_new's ops. In a gated MLP
		// they count as aten::gelu (no config pairs them so).
		fn = map[string]string{"gelu_accurate": "gelu_new"}[name]
		if fn == "" {
			fn = name
		}
		if gated {
			fn = "gelu"
		}
	case "silu", "swish":
		fn = "silu"
	case "relu":
		fn = "relu"
	case "relu2":
		fn = "relu2" // ReLUSquaredActivation: relu, then torch.square
	case "xielu":
		fn = "xielu" // XIELUActivation's Python path (nn/xielu.go)
	case "tanh":
		fn = "tanh"
	case "sigmoid":
		fn = "sigmoid"
	default:
		c.fail(key, "names an activation memsh does not know (got %q; known: gelu, gelu_new, gelu_pytorch_tanh, silu, relu, relu2, tanh, xielu)", name)
		return "gelu"
	}
	if !gated {
		return fn
	}
	switch fn {
	case "silu":
		return "swiglu"
	case "gelu":
		return "geglu"
	}
	c.fail(key, "must be a gated activation for model_type %q (got %q; known: silu, gelu, gelu_pytorch_tanh)", c.modelType, name)
	return "swiglu"
}
