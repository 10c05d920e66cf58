package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// hfConfig is a parsed config.json with typed getters. The first bad field
// is kept in err; later getters return zero values.
type hfConfig struct {
	raw       map[string]any
	modelType string
	name      string
	mtp       bool // build the multi-token prediction modules the checkpoint holds
	// noTokenTypes: BERT's batches carry no token_type_ids (Options.NoTokenTypes)
	noTokenTypes bool
	arch         string // the model class built (Options.Arch or architectures[0]; "" for the default)
	prefix       string // the path of a nested object's keys in config.json ("text_config."; "" at the top)
	ownBase      bool   // the model names its base itself (Llama4ForConditionalGeneration's language_model.model, BERT's and RoBERTa's), not the family's base
	// mrope: the language model of a vision-language model, whose
	// multimodal rotary cos and sin carry the batch of their 3-D position
	// ids (nn.Attention.RopeTablesBatch)
	mrope bool
	// proc is Options.Processor's preprocessor_config.json (nil when not
	// given); procRead says the family read it.
	proc     *hfConfig
	procRead bool
	err      *units.Error
}

// parseProcessor parses a preprocessor_config.json (Options.Processor),
// its errors naming that file.
func parseProcessor(data []byte) (*hfConfig, error) {
	p, err := parseHFConfig(data)
	if err != nil {
		var e *units.Error
		if errors.As(err, &e) {
			return nil, &units.Error{Msg: strings.Replace(e.Msg, "config.json", "preprocessor_config.json", 1),
				Hint: "processor= is the checkpoint's preprocessor_config.json, the JSON object beside its config.json"}
		}
		return nil, err
	}
	p.prefix = ""
	return p, nil
}

// at is key as config.json spells its path: a nested object's keys with
// the object's name before them, so an error names the key the file holds.
func (c *hfConfig) at(key string) string { return c.prefix + key }

func parseHFConfig(data []byte) (*hfConfig, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &units.Error{Msg: "config.json is empty",
			Hint: "a model's config.json is the JSON object next to its weights on the Hugging Face hub"}
	}
	text, at := PythonJSON(data)
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, jsonError(data, err, at)
	}
	// Decode stops after the first value; anything but white space after
	// it (a second object, a stray brace, garbage) makes a malformed file.
	rest := text[d.InputOffset():]
	if trimmed := bytes.TrimLeft(rest, " \t\r\n"); len(trimmed) > 0 {
		line, col := jsonPos(data, at(int64(len(text)-len(trimmed))))
		return nil, &units.Error{Msg: fmt.Sprintf("malformed config.json at line %d, column %d: text after the JSON value", line, col)}
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return nil, &units.Error{Msg: fmt.Sprintf("config.json must be a JSON object (got %s)", describeJSON(v))}
	}
	return &hfConfig{raw: raw}, nil
}

// jsonError names the line and column of a JSON syntax error; at maps an
// offset in the decoded text back to data.
func jsonError(data []byte, err error, at func(int64) int64) error {
	var se *json.SyntaxError
	off := int64(-1)
	if errors.As(err, &se) {
		off = se.Offset - 1 // Offset counts the offending byte
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		off = te.Offset
	}
	if err.Error() == "EOF" || err.Error() == "unexpected EOF" {
		return &units.Error{Msg: "malformed config.json: unexpected end of file",
			Hint: "the file ends before its JSON object does: was it cut short (a download or a copy that stopped)?"}
	}
	if off < 0 {
		return &units.Error{Msg: "malformed config.json: " + err.Error()}
	}
	line, col := jsonPos(data, at(off))
	return &units.Error{Msg: fmt.Sprintf("malformed config.json at line %d, column %d: %s", line, col, err)}
}

// jsonPos is the line and column (1-based, in bytes) of offset off of data.
func jsonPos(data []byte, off int64) (line, col int) {
	off = min(off, int64(len(data)))
	line, col = 1, 1
	for _, ch := range data[:off] {
		if ch == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// describeJSON renders a decoded JSON value for an error message.
func describeJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if x == "NaN" {
			return "NaN" // Python's json writes float('nan') so, unquoted; PythonJSON reads it as this string
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%t", x)
	case json.Number:
		if f, err := x.Float64(); math.IsInf(f, 0) && err != nil {
			if f > 0 {
				return "Infinity" // Python's json writes float('inf') so; PythonJSON reads it as 1e999
			}
			return "-Infinity"
		}
		return x.String()
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// maxHFDim bounds every size so that products of two sizes fit in int64;
// checkTotal bounds the whole count. It is the vocabulary bound, so that a
// vocab_size and an embedding() obey one rule.
const maxHFDim = core.MaxVocab

func (c *hfConfig) fail(key, format string, args ...any) {
	if c.err == nil {
		c.err = &units.Error{Msg: fmt.Sprintf("%q ", c.at(key)) + fmt.Sprintf(format, args...)}
	}
}

func (c *hfConfig) has(key string) bool {
	v, ok := c.raw[key]
	return ok && v != nil
}

// null says whether config.json sets key to null (set to null, not left
// out: a default applies only to a missing key).
func (c *hfConfig) null(key string) bool {
	v, ok := c.raw[key]
	return ok && v == nil
}

// size reads a required positive integer.
func (c *hfConfig) size(key string) int64 {
	if !c.has(key) {
		if c.err == nil {
			c.err = &units.Error{
				Msg:  fmt.Sprintf("config.json has no %q (model_type %q needs it, a positive integer)", c.at(key), c.modelType),
				Hint: "is this the model's config.json (the one next to its weights on the hub)?",
			}
		}
		return 0
	}
	return c.intValue(key, 1)
}

// sizeOr reads an optional positive integer.
func (c *hfConfig) sizeOr(key string, def int64) int64 {
	if !c.has(key) {
		return def
	}
	return c.intValue(key, 1)
}

// firstSize reads the first present key (for renamed fields: BLOOM's
// n_embed, Falcon's n_layer).
func (c *hfConfig) firstSize(keys ...string) int64 { return c.size(c.firstKey(keys...)) }

// firstKey is the first of keys that config.json sets, or keys[0].
func (c *hfConfig) firstKey(keys ...string) string {
	for _, k := range keys {
		if c.has(k) {
			return k
		}
	}
	return keys[0]
}

func (c *hfConfig) intValue(key string, min int64) int64 {
	v := c.raw[key]
	n, ok := v.(json.Number)
	if !ok {
		c.fail(key, "must be an integer (got %s)", describeJSON(v))
		return 0
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64() // a whole number past int64 is an integer too large, not no integer
		switch {
		case ferr != nil || f != math.Trunc(f) || math.IsInf(f, 0): // Infinity (json.Number "1e999") too
			c.fail(key, "must be an integer (got %s)", describeJSON(n))
			return 0
		case f > maxHFDim:
			c.fail(key, "is too large (got %s; memsh takes sizes up to %d)", n, maxHFDim)
			return 0
		case f < float64(min) && min == 1:
			c.fail(key, "must be positive (got %s)", describeJSON(n))
			return 0
		case f < float64(min):
			c.fail(key, "must be at least %d (got %s)", min, describeJSON(n))
			return 0
		}
		i = int64(f)
	}
	if i < min {
		if min == 1 {
			c.fail(key, "must be positive (got %d)", i)
		} else {
			c.fail(key, "must be at least %d (got %d)", min, i)
		}
		return 0
	}
	if i > maxHFDim {
		c.fail(key, "is too large (got %d; memsh takes sizes up to %d)", i, maxHFDim)
		return 0
	}
	if isLayerCount(key) && i > core.MaxLayers {
		if c.err == nil {
			c.err = &units.Error{Msg: fmt.Sprintf("%q is more layers than memsh simulates (got %d; at most %d)", c.at(key), i, core.MaxLayers),
				Hint: "a transformer has tens to a few hundred layers: check the layer counts in config.json"}
		}
		return 0
	}
	return i
}

// isLayerCount reports whether key counts layers (or the modules a model
// builds once per layer). intValue refuses such a count past
// core.MaxLayers as it reads it, so that a family never builds per-layer
// lists for it: Gemma 3's sliding-window pattern, a map entry per layer,
// took 7 s over 16,777,215 layers before the lowering's op bound refused
// the model (TestLayerCountRefusedWhenRead).
func isLayerCount(key string) bool {
	switch key {
	case "num_hidden_layers", "n_layer", "depth", "mtp_num_hidden_layers", "num_nextn_predict_layers", "num_global_layers":
		return true
	}
	return false
}

// count reads a required non-negative integer (a count that may be 0).
func (c *hfConfig) count(key string) int64 {
	if !c.has(key) {
		if c.err == nil {
			c.err = &units.Error{
				Msg:  fmt.Sprintf("config.json has no %q (model_type %q needs it, a whole number, 0 or more)", c.at(key), c.modelType),
				Hint: "is this the model's config.json (the one next to its weights on the hub)?",
			}
		}
		return 0
	}
	return c.intValue(key, 0)
}

// intOr reads an optional non-negative integer (a count that may be 0).
func (c *hfConfig) intOr(key string, def int64) int64 {
	if !c.has(key) {
		return def
	}
	return c.intValue(key, 0)
}

// flag reads an optional boolean.
func (c *hfConfig) flag(key string, def bool) bool {
	if !c.has(key) {
		return def
	}
	b, ok := c.raw[key].(bool)
	if !ok {
		c.fail(key, "must be true or false (got %s)", describeJSON(c.raw[key]))
	}
	return b
}

// prob reads an optional dropout probability in [0, 1).
func (c *hfConfig) prob(key string, def float64) float64 {
	if !c.has(key) {
		return def
	}
	n, ok := c.raw[key].(json.Number)
	f, err := n.Float64()
	if !ok || err != nil || f < 0 || f >= 1 {
		c.fail(key, "must be a probability in [0, 1) (got %s)", describeJSON(c.raw[key]))
		return 0
	}
	return f
}

// number reads an optional float.
func (c *hfConfig) number(key string, def float64) float64 {
	if !c.has(key) {
		return def
	}
	n, ok := c.raw[key].(json.Number)
	f, err := n.Float64()
	if !ok || err != nil {
		c.fail(key, "must be a number (got %s)", describeJSON(c.raw[key]))
		return 0
	}
	return f
}

// softcap reads a soft-capping value (Gemma 2): absent is def, null is
// none (0), else a positive number.
func (c *hfConfig) softcap(key string, def float64) float64 {
	v, ok := c.raw[key]
	if !ok {
		return def
	}
	if v == nil {
		return 0
	}
	n, ok := v.(json.Number)
	f, err := n.Float64()
	if !ok || err != nil || !(f > 0) || math.IsInf(f, 0) {
		c.fail(key, "must be a positive number or null (got %s)", describeJSON(v))
		return 0
	}
	return f
}

// str reads an optional string.
func (c *hfConfig) str(key, def string) string {
	if !c.has(key) {
		return def
	}
	s, ok := c.raw[key].(string)
	if !ok {
		c.fail(key, "must be a string (got %s)", describeJSON(c.raw[key]))
	}
	return s
}

// object checks that an optional field is an object or null (rope_scaling).
func (c *hfConfig) object(key string) {
	if c.has(key) {
		if _, ok := c.raw[key].(map[string]any); !ok {
			c.fail(key, "must be an object or null (got %s)", describeJSON(c.raw[key]))
		}
	}
}

// intList reads an optional list of integers in [0, n).
func (c *hfConfig) intList(key string, n int64) map[int64]bool {
	if !c.has(key) {
		return map[int64]bool{}
	}
	return c.layerList(key, 0, n, "layer indices")
}

// layerList reads the list key of layer numbers counted from base (0, or
// 1 as Kimi Linear's checkpoints count them), in base..base+n-1, as
// 0-based indices; what names them in the error.
func (c *hfConfig) layerList(key string, base, n int64, what string) map[int64]bool {
	out := map[int64]bool{}
	list, ok := c.raw[key].([]any)
	if !ok {
		c.fail(key, "must be a list of %s (got %s)", what, describeJSON(c.raw[key]))
		return out
	}
	for _, v := range list {
		num, ok := v.(json.Number)
		i, err := num.Int64()
		if !ok || err != nil || i < base || i >= base+n {
			c.fail(key, "must list %s in %d..%d (got %s)", what, base, base+n-1, describeJSON(v))
			return out
		}
		out[i-base] = true
	}
	return out
}

// withDefaults gives c's raw object the defaults for the keys it leaves
// out (a copy: the file's own object is not changed).
func (c *hfConfig) withDefaults(defaults map[string]json.Number) {
	raw := make(map[string]any, len(c.raw)+len(defaults))
	for k, v := range c.raw {
		raw[k] = v
	}
	for k, v := range defaults {
		if _, ok := raw[k]; !ok {
			raw[k] = v
		}
	}
	c.raw = raw
}

// sub reads a nested config object (vision_config, text_config) as a
// config of its own; its first bad field fails c.
func (c *hfConfig) sub(key string) *hfConfig {
	v, ok := c.raw[key].(map[string]any)
	if !ok {
		if c.err == nil {
			c.err = &units.Error{Msg: fmt.Sprintf("config.json has no %q object (model_type %q needs it)", c.at(key), c.modelType)}
		}
		return &hfConfig{raw: map[string]any{}, modelType: c.modelType, prefix: c.at(key) + ".", err: c.err}
	}
	return &hfConfig{raw: v, modelType: c.modelType, name: c.name, prefix: c.at(key) + "."}
}
