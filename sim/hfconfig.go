package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Hugging Face config.json support: FromHFConfig builds the Model that
// transformers would build for a config.json, out of the sim layer types,
// with parameter counts exact to the parameter (sum(p.numel() for p in
// model.parameters()): tied weights once, buffers such as rotary inv_freq
// and causal masks never).
//
// Sizes (hidden_size, num_hidden_layers, ...) are required; flags and
// dropout probabilities take the defaults of the family's transformers
// config class when absent. Families live in hfconfig_decoder.go (Llama
// and its relatives), hfconfig_gpt.go (GPT-2, GPT-NeoX, OPT, BLOOM,
// Falcon) and hfconfig_bert.go.

// hfFamily is one supported model_type.
type hfFamily struct {
	modelType string
	prefix    string   // class-name prefix: "Llama", "GPT2"
	heads     []hfHead // supported heads, the default first
	build     func(c *hfConfig, attn string, head hfHead) *Model
	// noFused: transformers has no SDPA or flash-attention path for this
	// family (BLOOM): attn="sdpa", the default, runs eager as transformers
	// does when no attn_implementation is requested; "flash" is an error.
	noFused bool
	noFlash bool // no flash-attention 2 path (BERT)
}

// hfHead is the model class on top of the base model.
type hfHead int

const (
	headCausalLM hfHead = iota // XxxForCausalLM (GPT-2: GPT2LMHeadModel)
	headBase                   // XxxModel: no head, the loss sums the last hidden state
	headMaskedLM               // BertForMaskedLM
	headSeqCls                 // BertForSequenceClassification
	headTokenCls               // BertForTokenClassification
)

// headSuffixes maps class-name suffixes to heads, longest first so that
// "LMHeadModel" is not read as "Model".
var headSuffixes = []struct {
	suffix string
	head   hfHead
}{
	{"ForSequenceClassification", headSeqCls},
	{"ForTokenClassification", headTokenCls},
	{"ForCausalLM", headCausalLM},
	{"LMHeadModel", headCausalLM},
	{"ForMaskedLM", headMaskedLM},
	{"Model", headBase},
}

func (f *hfFamily) className(h hfHead) string {
	switch h {
	case headCausalLM:
		if f.modelType == "gpt2" {
			return f.prefix + "LMHeadModel"
		}
		return f.prefix + "ForCausalLM"
	case headMaskedLM:
		return f.prefix + "ForMaskedLM"
	case headSeqCls:
		return f.prefix + "ForSequenceClassification"
	case headTokenCls:
		return f.prefix + "ForTokenClassification"
	}
	return f.prefix + "Model"
}

var decoderHeads = []hfHead{headCausalLM, headBase}

// hfFamilies is the read-only table of supported model types.
var hfFamilies = []hfFamily{
	{modelType: "bert", prefix: "Bert", heads: []hfHead{headMaskedLM, headBase, headSeqCls, headTokenCls}, build: buildBERT, noFlash: true},
	{modelType: "bloom", prefix: "Bloom", heads: decoderHeads, build: buildBLOOM, noFused: true},
	{modelType: "falcon", prefix: "Falcon", heads: decoderHeads, build: buildFalcon},
	{modelType: "gemma", prefix: "Gemma", heads: decoderHeads, build: buildDecoder},
	{modelType: "gemma2", prefix: "Gemma2", heads: decoderHeads, build: buildDecoder},
	{modelType: "gpt2", prefix: "GPT2", heads: decoderHeads, build: buildGPT2},
	{modelType: "gpt_neox", prefix: "GPTNeoX", heads: decoderHeads, build: buildGPTNeoX},
	{modelType: "llama", prefix: "Llama", heads: decoderHeads, build: buildDecoder},
	{modelType: "mistral", prefix: "Mistral", heads: decoderHeads, build: buildDecoder},
	{modelType: "mixtral", prefix: "Mixtral", heads: decoderHeads, build: buildDecoder},
	{modelType: "opt", prefix: "OPT", heads: decoderHeads, build: buildOPT},
	{modelType: "phi3", prefix: "Phi3", heads: decoderHeads, build: buildDecoder},
	{modelType: "qwen2", prefix: "Qwen2", heads: decoderHeads, build: buildDecoder},
	{modelType: "qwen2_moe", prefix: "Qwen2Moe", heads: decoderHeads, build: buildDecoder},
	{modelType: "qwen3", prefix: "Qwen3", heads: decoderHeads, build: buildDecoder},
}

// HFModelTypes lists the model_type values FromHFConfig supports, sorted.
func HFModelTypes() []string {
	out := make([]string, len(hfFamilies))
	for i, f := range hfFamilies {
		out[i] = f.modelType
	}
	sort.Strings(out)
	return out
}

// FromHFConfig builds the model that a Hugging Face config.json describes,
// as the class named first in its "architectures" builds it (the family's
// causal LM when the field is absent; BertForMaskedLM for BERT). attn is
// the attention kernel the model runs with: "eager", "sdpa" or "flash"
// (transformers' attn_implementation; "flash_attention_2" is accepted).
func FromHFConfig(data []byte, attn string) (*Model, error) {
	return FromHFConfigArch(data, attn, "")
}

// FromHFConfigArch is FromHFConfig for the model class arch (e.g.
// "BertModel", "BertForSequenceClassification", "LlamaForCausalLM")
// instead of the config's architectures[0]; "" means the config's.
func FromHFConfigArch(data []byte, attn, arch string) (*Model, error) {
	c, err := parseHFConfig(data)
	if err != nil {
		return nil, err
	}
	mt, ok := c.raw["model_type"]
	if !ok || mt == nil {
		return nil, &Error{Msg: `config.json has no "model_type"`, Hint: "supported model types: " + strings.Join(HFModelTypes(), ", ")}
	}
	s, ok := mt.(string)
	if !ok {
		return nil, &Error{Msg: fmt.Sprintf(`"model_type" must be a string (got %s)`, describeJSON(mt))}
	}
	c.modelType = s
	var fam *hfFamily
	for i := range hfFamilies {
		if hfFamilies[i].modelType == s {
			fam = &hfFamilies[i]
		}
	}
	if fam == nil {
		return nil, &Error{
			Msg:  fmt.Sprintf("unsupported model_type %q (supported: %s)", s, strings.Join(HFModelTypes(), ", ")),
			Hint: `describe the model with the building blocks (attention, mlp, repeat, model) or load("@stdlib//llm.star", ...)`,
		}
	}
	impl, err := fam.attnImpl(attn)
	if err != nil {
		return nil, err
	}
	head, err := c.head(fam, arch)
	if err != nil {
		return nil, err
	}
	c.name = s
	if n, ok := c.raw["_name_or_path"].(string); ok && n != "" {
		c.name = n
	}
	m := fam.build(c, impl, head)
	if c.err != nil {
		return nil, c.err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

func (f *hfFamily) attnImpl(attn string) (string, error) {
	switch attn {
	case "eager", "sdpa", "flash":
	case "flash_attention_2":
		attn = "flash"
	default:
		return "", &Error{Msg: fmt.Sprintf(`attn must be "eager", "sdpa" or "flash" (got %q)`, attn),
			Hint: "attn is the attention kernel the model runs with (transformers' attn_implementation)"}
	}
	if attn == "flash" && (f.noFused || f.noFlash) {
		alt := `"sdpa" or "eager"`
		if f.noFused {
			alt = `"eager"`
		}
		return "", &Error{Msg: fmt.Sprintf("transformers has no flash-attention path for model_type %q", f.modelType),
			Hint: "use attn=" + alt}
	}
	if attn == "sdpa" && f.noFused {
		attn = "eager" // transformers' default load falls back to eager
	}
	return attn, nil
}

// head picks the model class: arch, else architectures[0], else the default.
func (c *hfConfig) head(f *hfFamily, arch string) (hfHead, error) {
	if arch == "" {
		if list, ok := c.raw["architectures"].([]any); ok && len(list) > 0 {
			arch, _ = list[0].(string)
		}
	}
	if arch == "" {
		return f.heads[0], nil
	}
	var names []string
	for _, h := range f.heads {
		names = append(names, f.className(h))
	}
	for _, hs := range headSuffixes {
		if !strings.HasSuffix(arch, hs.suffix) {
			continue
		}
		for _, h := range f.heads {
			if h == hs.head {
				return h, nil
			}
		}
		break
	}
	return 0, &Error{
		Msg:  fmt.Sprintf("model class %q is not supported for model_type %q (supported: %s)", arch, f.modelType, strings.Join(names, ", ")),
		Hint: fmt.Sprintf("pass arch=%q to count the %s instead", names[0], names[0]),
	}
}

// hfConfig is a parsed config.json with typed getters. The first bad field
// is kept in err; later getters return zero values.
type hfConfig struct {
	raw       map[string]any
	modelType string
	name      string
	err       *Error
}

func parseHFConfig(data []byte) (*hfConfig, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, jsonError(data, err)
	}
	// Decode stops after the first value; anything but white space after
	// it (a second object, a stray brace, garbage) makes a malformed file.
	rest := data[d.InputOffset():]
	if trimmed := bytes.TrimLeft(rest, " \t\r\n"); len(trimmed) > 0 {
		line, col := jsonPos(data, int64(len(data)-len(trimmed)))
		return nil, &Error{Msg: fmt.Sprintf("malformed config.json at line %d, column %d: text after the JSON value", line, col)}
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Msg: fmt.Sprintf("config.json must be a JSON object (got %s)", describeJSON(v))}
	}
	return &hfConfig{raw: raw}, nil
}

// jsonError names the line and column of a JSON syntax error.
func jsonError(data []byte, err error) error {
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
		return &Error{Msg: "malformed config.json: unexpected end of file"}
	}
	if off < 0 {
		return &Error{Msg: "malformed config.json: " + err.Error()}
	}
	line, col := jsonPos(data, off)
	return &Error{Msg: fmt.Sprintf("malformed config.json at line %d, column %d: %s", line, col, err)}
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
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%t", x)
	case json.Number:
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
const maxHFDim = MaxVocab

func (c *hfConfig) fail(key, format string, args ...any) {
	if c.err == nil {
		c.err = &Error{Msg: fmt.Sprintf("%q ", key) + fmt.Sprintf(format, args...)}
	}
}

func (c *hfConfig) has(key string) bool {
	v, ok := c.raw[key]
	return ok && v != nil
}

// size reads a required positive integer.
func (c *hfConfig) size(key string) int64 {
	if !c.has(key) {
		if c.err == nil {
			c.err = &Error{
				Msg:  fmt.Sprintf("config.json has no %q (model_type %q needs it, a positive integer)", key, c.modelType),
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
func (c *hfConfig) firstSize(keys ...string) int64 {
	for _, k := range keys {
		if c.has(k) {
			return c.intValue(k, 1)
		}
	}
	return c.size(keys[0])
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
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > maxHFDim {
			c.fail(key, "must be an integer (got %s)", n)
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
	return i
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
	out := map[int64]bool{}
	if !c.has(key) {
		return out
	}
	list, ok := c.raw[key].([]any)
	if !ok {
		c.fail(key, "must be a list of layer indices (got %s)", describeJSON(c.raw[key]))
		return out
	}
	for _, v := range list {
		num, ok := v.(json.Number)
		i, err := num.Int64()
		if !ok || err != nil || i < 0 || i >= n {
			c.fail(key, "must list layer indices in 0..%d (got %s)", n-1, describeJSON(v))
			return out
		}
		out[i] = true
	}
	return out
}

// headDim reads head_dim, or derives hidden/heads (which must divide).
func (c *hfConfig) headDim(hidden, heads, def int64) int64 {
	if c.has("head_dim") {
		return c.intValue("head_dim", 1)
	}
	if def > 0 {
		return def
	}
	if heads > 0 && hidden%heads != 0 && c.err == nil {
		c.err = &Error{
			Msg:  fmt.Sprintf("hidden size %d is not a multiple of %d attention heads", hidden, heads),
			Hint: `set "head_dim" in config.json when it is not hidden_size / num_attention_heads`,
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
		c.err = &Error{Msg: fmt.Sprintf("config.json describes about %.3g parameters, more than memsh can count", estimate),
			Hint: "check the sizes in config.json"}
	}
}

// attnDropout maps the probabilities-dropout pa and the output dropout po
// of an attention block onto Attention.Dropout, which drops both with one
// probability: equal, or pa = 0 with a separate Dropout after the block.
func (c *hfConfig) attnDropout(paKey string, pa, po float64) (float64, []Layer) {
	switch {
	case pa == po:
		return pa, nil
	case pa == 0:
		return 0, []Layer{&Dropout{Name: "dropout", P: po}}
	}
	if c.err == nil {
		c.err = &Error{
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
	case "gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate", "quick_gelu":
		fn = "gelu"
	case "silu", "swish":
		fn = "silu"
	case "relu":
		fn = "relu"
	case "tanh":
		fn = "tanh"
	case "sigmoid":
		fn = "sigmoid"
	default:
		c.fail(key, "names an activation memsh does not know (got %q; known: gelu, gelu_new, gelu_pytorch_tanh, silu, relu, tanh)", name)
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

// finish makes the Model with the head.
func (c *hfConfig) finish(head hfHead, layers []Layer, vocab int64, tie bool) *Model {
	m := &Model{Name: c.name, Layers: layers, Loss: "cross_entropy"}
	switch head {
	case headCausalLM:
		// transformers' ForCausalLMLoss upcasts the logits: logits.float()
		// (transformers/loss/loss_utils.py).
		m.Vocab, m.TieEmbeddings, m.LogitsFP32 = vocab, tie, true
	case headBase:
		m.Loss = "none"
	}
	return m
}

// stackBlocks is the decoder stack: runs of the same block become repeats.
func stackBlocks(name string, blocks []Layer) Layer {
	var runs []Layer
	for i := 0; i < len(blocks); {
		j := i
		for j < len(blocks) && blocks[j] == blocks[i] {
			j++
		}
		runs = append(runs, &Repeat{Name: fmt.Sprintf("%s_%d_%d", name, i, j-1), Layer: blocks[i], N: int64(j - i)})
		i = j
	}
	if len(runs) == 1 {
		r := runs[0].(*Repeat)
		r.Name = name
		return r
	}
	return &Sequential{Name: name, Layers: runs}
}

func seq(ls ...Layer) *Sequential { return &Sequential{Layers: ls} }

func res(ls ...Layer) *Residual {
	if len(ls) == 1 {
		return &Residual{Layer: ls[0]}
	}
	return &Residual{Layer: seq(ls...)}
}
