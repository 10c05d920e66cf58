package hf

import (
	"fmt"
	"sort"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Hugging Face config.json support: FromConfig builds the Model that
// transformers would build for a config.json, out of the sim layer types,
// with parameter counts exact to the parameter (sum(p.numel() for p in
// model.parameters()): tied weights once, buffers such as rotary inv_freq
// and causal masks never).
//
// Sizes (hidden_size, num_hidden_layers, ...) are required; flags and
// dropout probabilities take the defaults of the family's transformers
// config class when absent. families.go lists the supported model types;
// the families live in decoder.go (Llama and its relatives), gpt.go
// (GPT-2, GPT-NeoX, OPT, BLOOM, Falcon), bert.go and a file a family
// beyond those.

// hfFamily is one supported model_type.
type hfFamily struct {
	modelType string
	prefix    string // class-name prefix: "Llama", "GPT2"
	// base is the base model's attribute in the model with a head, the
	// first component of the head model's parameter names: "model"
	// (LlamaForCausalLM.model), "transformer" (GPT2LMHeadModel.transformer).
	// The base model alone (XxxModel) has no such prefix.
	base string
	// modelBaseSince: from this release transformers' own modelling holds
	// the base model as "model" where the hub's remote code, run before
	// it, held it as base (nemotron_h: "backbone" before 5.3).
	modelBaseSince [2]int
	heads          []hfHead // supported heads, the default first
	build          func(c *hfConfig, attn string, head hfHead) *core.Model
	// noFused: transformers has no SDPA or flash-attention path for this
	// family (BLOOM): attn="sdpa", the default, runs eager as transformers
	// does when no attn_implementation is requested; "flash" is an error.
	noFused bool
	// sdpaUntil is the first release without an SDPA path ({0, 0}: none
	// dropped it), from which attn="sdpa" runs eager as noFused's does:
	// Gemma 2 from 5.21 (Gemma2PreTrainedModel._supports_sdpa = False,
	// "sdpa does not support softcapping", in the 5.21.0 to 5.25.0 wheels;
	// True in 5.20.0).
	sdpaUntil [2]int
	// sdpaSince is the first release with an SDPA path ({0, 0}: every
	// release modelled has one); before it attn="sdpa" runs eager as
	// noFused's does: StableLM before 4.40 (the 4.38.0 and 4.39.3 wheels'
	// modeling_stablelm.py has no StableLmSdpaAttention; 4.40.0's has).
	sdpaSince [2]int
	// noSDPA: no SDPA path, but a flash one (GraniteSWA's
	// _supports_sdpa False beside its flash kernels with sinks):
	// attn="sdpa", the default, runs eager as transformers' default load
	// does; "flash" stays flash.
	noSDPA  bool
	noFlash bool // no flash-attention 2 path
	// flashSince is the first release with a flash-attention 2 path
	// ({0, 0}: every release modelled has one, or noFlash): BERT from 5.0,
	// whose BertPreTrainedModel sets _supports_flash_attn (the 5.0.0
	// wheel; 4.57.1's BertSelfAttention and BertSdpaSelfAttention have
	// none, and from_pretrained refuses flash_attention_2).
	flashSince [2]int
	noEager    bool // eager attention is not modelled (multi-head latent attention)
	vl         bool // a vision-language model: XxxForConditionalGeneration
	// condGen: transformers has XxxForConditionalGeneration for this
	// model_type (every vl family's too): architectures[0] of Qwen3.5's
	// checkpoints, natively multimodal. No other family accepts the class.
	condGen bool
	// since is the first transformers release whose modelling builds the
	// family ({0, 0}: not checked): a config of a newer family under an
	// older transformers= is refused, as that release cannot load it.
	since [2]int
	// sinceWhy, for a family since does not date from its first release,
	// says what changed then (the error's hint names it).
	sinceWhy string
	// experts: from transformers 5.0 the family's MoE blocks hold 3-D
	// expert weights run by experts_implementation, renamed as it says
	// (setExperts); nil: no such blocks (experts= is refused).
	experts *hfExperts
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
	{condGenSuffix, headCausalLM}, // vision-language models (hfFamily.condGen)
	{"ForCausalLM", headCausalLM},
	{"LMHeadModel", headCausalLM},
	{"ForMaskedLM", headMaskedLM},
	{"Model", headBase},
}

// condGenSuffix is the class-name suffix of transformers' vision-language
// models, which only their families accept (hfFamily.vl, condGen).
const condGenSuffix = "ForConditionalGeneration"

// condGenTypes lists the model types with a ForConditionalGeneration class.
func condGenTypes() []string {
	var out []string
	for _, f := range hfFamilies {
		if f.vl || f.condGen {
			out = append(out, f.modelType)
		}
	}
	sort.Strings(out)
	return out
}

func (f *hfFamily) className(h hfHead) string {
	switch h {
	case headCausalLM:
		if f.modelType == "gpt2" {
			return f.prefix + "LMHeadModel"
		}
		if f.vl {
			return f.prefix + condGenSuffix
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

// vlHeads: a vision-language model's ForConditionalGeneration is its
// causal LM.
var vlHeads = []hfHead{headCausalLM, headBase}

// ModelTypes lists the model_type values FromConfig supports, sorted.
func ModelTypes() []string {
	out := make([]string, len(hfFamilies))
	for i, f := range hfFamilies {
		out[i] = f.modelType
	}
	sort.Strings(out)
	return out
}

// FromConfig builds the model that a Hugging Face config.json describes,
// as the class named first in its "architectures" builds it (the family's
// causal LM when the field is absent; BertForMaskedLM for BERT). attn is
// the attention kernel the model runs with: "eager", "sdpa" or "flash"
// (transformers' attn_implementation; "flash_attention_2" is accepted).
func FromConfig(data []byte, attn string) (*core.Model, error) {
	return FromConfigArch(data, attn, "")
}

// FromConfigArch is FromConfig for the model class arch (e.g.
// "BertModel", "BertForSequenceClassification", "LlamaForCausalLM")
// instead of the config's architectures[0]; "" means the config's.
func FromConfigArch(data []byte, attn, arch string) (*core.Model, error) {
	return FromConfigOptions(data, Options{Attn: attn, Arch: arch})
}

// Options are FromConfigOptions's choices.
type Options struct {
	Attn string // the attention kernel: "eager", "sdpa" or "flash"
	Arch string // the model class; "" = the config's architectures[0]
	// MTP builds the multi-token prediction modules the checkpoint holds
	// (DeepSeek-V3's num_nextn_predict_layers), which transformers does
	// not build, as DeepSeek and Megatron train them.
	MTP bool
	// Transformers is the transformers version the model trains with
	// ("4.57.1", "5.25.0"; "" = DefaultTransformers): from 4.54 SDPA gets GQA's kv
	// heads without repeat_kv's copies when no mask is passed.
	Transformers string
	// Experts is transformers 5's experts_implementation for the MoE
	// blocks: "grouped_mm" (its default) or "eager" (the per-expert
	// loop); "" = the version's default. Before 5.0 it must be "", or
	// ExpertsMegatron (Megatron-Core's grouped experts, before 5.0 only).
	Experts string
	// LinearAttn is the kernel of the Gated DeltaNet layers (Qwen3-Next,
	// Qwen3.5): "fla" (flash-linear-attention and causal-conv1d, the
	// default) or "torch" (transformers' fallback); "" = "fla".
	LinearAttn string
	// Processor is the checkpoint's preprocessor_config.json (nil: the
	// processor's defaults), whose image options the families that model
	// them read (idefics3 and smolvlm: size, max_image_size,
	// do_image_splitting; lfm2_vl: Lfm2VlImageProcessor's tiling and image
	// token options); any other family refuses it.
	Processor []byte
	// NoTokenTypes: BERT's batches carry no token_type_ids (a tokenizer or
	// collator without them), so its embeddings make their own from the
	// token_type_ids buffer (setBERTTokenTypes); only model_type "bert"
	// takes it (RoBERTa's and XLM-RoBERTa's batches carry none already).
	NoTokenTypes bool
	// VocabMultiple pads the vocabulary up to a multiple of it (0: as
	// config.json says): resize_token_embeddings to a multiple, Axolotl's
	// resize_token_embeddings_to_32x (vocab_multiple.go).
	VocabMultiple int64
}

// FromConfigOptions builds the model a config.json describes, with opts.
func FromConfigOptions(data []byte, opts Options) (*core.Model, error) {
	attn, arch := opts.Attn, opts.Arch
	if err := checkRelease(opts.Transformers); err != nil {
		return nil, err
	}
	c, err := parseHFConfig(data)
	if err != nil {
		return nil, err
	}
	c.mtp, c.noTokenTypes = opts.MTP, opts.NoTokenTypes
	if err := c.padVocab(opts.VocabMultiple); err != nil {
		return nil, err
	}
	if opts.Processor != nil {
		if c.proc, err = parseProcessor(opts.Processor); err != nil {
			return nil, err
		}
	}
	mt, ok := c.raw["model_type"]
	if !ok || mt == nil {
		return nil, &units.Error{Msg: `config.json has no "model_type"`, Hint: "supported model types: " + strings.Join(ModelTypes(), ", ")}
	}
	s, ok := mt.(string)
	if !ok {
		return nil, &units.Error{Msg: fmt.Sprintf(`"model_type" must be a string (got %s)`, describeJSON(mt))}
	}
	c.modelType = s
	var fam *hfFamily
	for i := range hfFamilies {
		if hfFamilies[i].modelType == s {
			fam = &hfFamilies[i]
		}
	}
	if r, ok := refusedTypes[s]; fam == nil && ok {
		return nil, &units.Error{Msg: fmt.Sprintf("model_type %q is not supported yet: %s", s, r.why), Hint: r.hint}
	}
	if fam == nil {
		return nil, &units.Error{
			Msg:  fmt.Sprintf("unsupported model_type %q (supported: %s)", s, strings.Join(ModelTypes(), ", ")),
			Hint: `describe the model with the building blocks (attention, mlp, repeat, model) or load("@stdlib//llm.star", ...)`,
		}
	}
	saved, _ := c.raw["transformers_version"].(string)
	if err := fam.checkSince(opts.Transformers, saved); err != nil {
		return nil, err
	}
	impl, err := fam.attnImpl(attn, opts.Transformers)
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
	c.classKeys(s) // the config class's names and defaults (config_class.go)
	m := fam.build(c, impl, head)
	if c.err != nil {
		return nil, c.err
	}
	if c.proc != nil && !c.procRead {
		return nil, &units.Error{Msg: fmt.Sprintf("processor= is not read for model_type %q: memsh models the image processor's options of idefics3, smolvlm and lfm2_vl only", s),
			Hint: "leave processor= out: train(images=) takes this family's images at the processor's defaults (docs/models.md names them)"}
	}
	experts := opts.Experts
	if experts == ExpertsMegatron { // Megatron's own experts, not transformers 5's (megatron_experts.go)
		experts = ""
	}
	if err := useTransformers(m, c, fam, opts.Transformers, experts); err != nil {
		return nil, err
	}
	if opts.Experts == ExpertsMegatron {
		if err := setMegatronExperts(m, opts.Transformers); err != nil {
			return nil, err
		}
	}
	if err := useLinearAttn(m, s, opts.LinearAttn); err != nil {
		return nil, err
	}
	m.PositionIDs = handsPositionIDs(s)
	m.PEFTMamba = peftMambaTypes[s]
	if head != headBase && !c.ownBase {
		// The head model holds the base model as an attribute, which
		// prefixes its parameters: model.layers.0.self_attn.q_proj.weight.
		m.Layers = []core.Layer{&core.Sequential{Name: fam.baseName(opts.Transformers), Layers: m.Layers}}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// baseName is the base model's attribute under transformers release
// version ("" = DefaultTransformers, validated by useTransformers).
func (f *hfFamily) baseName(version string) string {
	if version == "" {
		version = DefaultTransformers
	}
	if v, err := parseTransformers(version); err == nil && f.modelBaseSince != [2]int{} && atLeast(v, f.modelBaseSince) {
		return "model"
	}
	return f.base
}

// checkSince refuses a family the transformers release cannot build;
// saved is the release that wrote the config.json ("" when it says none),
// named in the hint.
func (f *hfFamily) checkSince(version, saved string) error {
	if f.since == [2]int{} {
		return nil
	}
	if version == "" {
		version = DefaultTransformers
	}
	v, err := parseTransformers(version)
	if err != nil {
		return err
	}
	if atLeast(v, f.since) {
		return nil
	}
	want := fmt.Sprintf("%d.%d", f.since[0], f.since[1])
	hint := fmt.Sprintf("transformers %s first ships %s: pass transformers=%q (or the release the model trains with)", want, f.className(f.heads[0]), want+".0")
	if f.sinceWhy != "" {
		hint = fmt.Sprintf("memsh models %s as transformers %s and later build it (%s): pass transformers=%q or later", f.className(f.heads[0]), want, f.sinceWhy, want+".0")
	}
	if saved != "" {
		hint += fmt.Sprintf("; this config.json was written by transformers %s", saved)
	}
	return &units.Error{Msg: fmt.Sprintf("model_type %q needs transformers %s or later (got transformers=%q)", f.modelType, want, version), Hint: hint}
}

func (f *hfFamily) attnImpl(attn, version string) (string, error) {
	switch attn {
	case "eager", "sdpa", "flash":
	case "flash_attention_2":
		attn = "flash"
	default:
		return "", &units.Error{Msg: fmt.Sprintf(`attn must be "eager", "sdpa" or "flash" (got %q)`, attn),
			Hint: "attn is the attention kernel the model runs with (transformers' attn_implementation)"}
	}
	if attn == "eager" && f.noEager {
		return "", &units.Error{Msg: fmt.Sprintf("eager attention is not modelled for model_type %q (multi-head latent attention)", f.modelType),
			Hint: `use attn="sdpa" or "flash"`}
	}
	if attn == "flash" && (f.noFused || f.noFlash) {
		alt := `"sdpa" or "eager"`
		switch {
		case f.noFused:
			alt = `"eager"`
		case f.noEager:
			alt = `"sdpa"`
		}
		return "", &units.Error{Msg: fmt.Sprintf("transformers has no flash-attention path for model_type %q", f.modelType),
			Hint: "use attn=" + alt}
	}
	if version == "" {
		version = DefaultTransformers
	}
	v, err := parseTransformers(version)
	if err != nil {
		return "", err
	}
	if attn == "flash" && f.flashSince != [2]int{} && !atLeast(v, f.flashSince) {
		since := fmt.Sprintf("%d.%d", f.flashSince[0], f.flashSince[1])
		return "", &units.Error{Msg: fmt.Sprintf("transformers %s has no flash-attention path for model_type %q (from %s)", version, f.modelType, since),
			Hint: fmt.Sprintf(`use attn="sdpa" or "eager", or transformers=%q or later`, since+".0")}
	}
	if attn == "sdpa" && (f.noFused || f.noSDPA || f.sdpaUntil != [2]int{} && atLeast(v, f.sdpaUntil) || f.sdpaSince != [2]int{} && !atLeast(v, f.sdpaSince)) {
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
	c.arch = arch
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
		if hs.suffix == condGenSuffix && !f.vl && !f.condGen {
			return 0, &units.Error{
				Msg: fmt.Sprintf("model_type %q has no ForConditionalGeneration class (got model class %q; supported: %s)", f.modelType, arch, strings.Join(names, ", ")),
				Hint: fmt.Sprintf("transformers' ForConditionalGeneration classes are its vision-language models' (model_type %s), whose config.json says so; pass arch=%q to count the %s",
					strings.Join(condGenTypes(), ", "), names[0], names[0]),
			}
		}
		for _, h := range f.heads {
			if h == hs.head {
				return h, nil
			}
		}
		break
	}
	return 0, &units.Error{
		Msg:  fmt.Sprintf("model class %q is not supported for model_type %q (supported: %s)", arch, f.modelType, strings.Join(names, ", ")),
		Hint: fmt.Sprintf("pass arch=%q to count the %s instead", names[0], names[0]),
	}
}

// finish makes the Model with the head.
func (c *hfConfig) finish(head hfHead, layers []core.Layer, vocab int64, tie bool) *core.Model {
	m := &core.Model{Name: c.name, Layers: layers, Loss: "cross_entropy"}
	// The decoders' base model keeps inputs_embeds in a local through its
	// layer loop and final norm (hidden_states = inputs_embeds, e.g.
	// LlamaModel.forward in models/llama/modeling_llama.py, transformers
	// 4.x and 5.x; GPT-2 and OPT add the position embeddings to it, BLOOM
	// norms it, GPT-NeoX drops out of it: a new tensor each, the lookup's
	// output still held). BERT's lookup runs inside BertEmbeddings, whose
	// locals are gone when it returns (bert.go).
	m.HoldsEmbedding = true
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

// stackBlocks is the decoder stack: one repeat of n copies when the
// blocks are all the same layer, else a stack of differing blocks named
// layers.0, layers.1, ... (core.Repeat.Blocks).
func stackBlocks(name string, blocks []core.Layer) core.Layer {
	for _, b := range blocks {
		if b != blocks[0] {
			return &core.Repeat{Name: name, Blocks: blocks}
		}
	}
	return &core.Repeat{Name: name, Layer: blocks[0], N: int64(len(blocks))}
}

func seq(ls ...core.Layer) *core.Sequential { return &core.Sequential{Layers: ls} }

func res(ls ...core.Layer) *core.Residual {
	if len(ls) == 1 {
		return &core.Residual{Layer: ls[0]}
	}
	return &core.Residual{Layer: seq(ls...)}
}

// hintBug is the hint of an error that says memsh built a model wrongly,
// not that the config is wrong.
const hintBug = "this is memsh's own mistake, not the config's: please report it with the config.json"

// decoderSizes reads the sizes a Llama-shaped decoder's config.json
// states (hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads defaulting to the heads and dividing them,
// vocab_size, intermediate_size), in that order, so that the first key
// missing or wrong is the one the error names.
func (c *hfConfig) decoderSizes() (hidden, layers, heads, kv, vocab, inter int64) {
	hidden = c.size("hidden_size")
	layers = c.size("num_hidden_layers")
	heads = c.size("num_attention_heads")
	kv = c.kvHeads("num_key_value_heads", heads)
	vocab = c.size("vocab_size")
	inter = c.size("intermediate_size")
	return hidden, layers, heads, kv, vocab, inter
}
