package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildGemma3n builds Gemma 3n's text model as transformers builds it
// (models/gemma3n/modeling_gemma3n.py, 5.25.0): Gemma3nForCausalLM for
// model_type gemma3n_text, and for gemma3n (google/gemma-3n-E2B-it,
// E4B-it) the same class on text_config, as
// Gemma3nForCausalLM.from_pretrained loads it from a gemma3n checkpoint
// (the config's text_config; its weights' language_model prefix mapped to
// model, conversion_mapping.py). Gemma3nForConditionalGeneration and
// Gemma3nModel are refused: their vision tower is timm's MobileNet-V5
// (mobilenetv5_300m_enc, built by timm, not transformers) and their audio
// encoder a Conformer, neither modelled.
//
// The model (Gemma3nTextModel): the scaled embeddings and the per-layer
// inputs as Gemma 4 makes them (nn.Gemma4Embed; ids past
// vocab_size_per_layer_input read row 0), altup_num_inputs AltUp streams
// (nn.AltUpStreams), the decoder layers (nn.Gemma3nLayer: AltUp's predict
// and correct around LAuReL, attention and the MLP, then the per-layer
// block), the streams' mean, the final norm, lm_head tied to the
// embeddings (tie_word_embeddings, default true) and the logits
// soft-capped by final_logit_softcapping (default 30). Layers are sliding
// or full by layer_types (default: every fifth full); the last
// num_kv_shared_layers (default 15) reuse the keys and values of the last
// earlier layer of their type (no k_proj, v_proj, k_norm or v_norm: the
// checkpoints hold them, transformers drops them on load). intermediate_size
// and activation_sparsity_pattern are one value or one per layer; a layer
// with sparsity > 0 (default: the first 10 of more than 10 at 0.95) runs
// the Gaussian top-k on its gate (nn.MLP's Sparsity).
func buildGemma3n(c *hfConfig, attn string, head hfHead) *core.Model {
	if c.modelType == "gemma3n" {
		if !strings.HasSuffix(c.arch, "ForCausalLM") {
			c.err = &units.Error{
				Msg: "Gemma 3n's vision tower (timm's MobileNet-V5, mobilenetv5_300m_enc) and audio encoder are not modelled: " +
					"model class " + c.arch + " holds them",
				Hint: `pass arch="Gemma3nForCausalLM" for the language model alone (Gemma3nForCausalLM.from_pretrained loads it from this checkpoint), trained on text; ` +
					"it holds about 0.98 B parameters fewer than this class, which also runs embed_vision and embed_audio on every token",
			}
			return nil
		}
		tc := c.sub("text_config")
		if c.err != nil {
			return nil
		}
		tc.modelType, tc.arch = "gemma3n_text", c.arch
		m := tc.gemma3nText(attn, head)
		c.err = tc.err
		if m != nil {
			m.Name = c.name
		}
		return m
	}
	return c.gemma3nText(attn, head)
}

// gemma3nText is Gemma3nForCausalLM (or Gemma3nTextModel) from a
// Gemma3nTextConfig.
func (c *hfConfig) gemma3nText(attn string, head hfHead) *core.Model {
	hidden := c.sizeOr("hidden_size", 2048)
	layers := c.sizeOr("num_hidden_layers", 35)
	heads := c.sizeOr("num_attention_heads", 8)
	kv := int64(2)
	if c.has("num_key_value_heads") {
		kv = c.kvHeads("num_key_value_heads", heads)
	}
	vocab := c.sizeOr("vocab_size", 262400)
	hd := c.sizeOr("head_dim", 256)
	inter := c.perLayerSizes("intermediate_size", 16384, layers)
	sparsity := c.gemma3nSparsity(layers)
	window := c.sizeOr("sliding_window", 512)
	act := c.mlpAct("hidden_activation", "gelu_pytorch_tanh", true)
	drop := c.prob("attention_dropout", 0)
	logitCap := c.softcap("final_logit_softcapping", 30)
	tie := c.flag("tie_word_embeddings", true)
	ple := c.sizeOr("hidden_size_per_layer_input", 256)
	pleVocab := c.sizeOr("vocab_size_per_layer_input", 262144)
	streams := c.sizeOr("altup_num_inputs", 4)
	rank := c.sizeOr("laurel_rank", 64)
	nShared := c.intOr("num_kv_shared_layers", 15)
	if active := c.intOr("altup_active_idx", 0); active >= streams && c.err == nil {
		c.fail("altup_active_idx", "must name one of the altup_num_inputs (%d) streams (got %d)", streams, active)
	}
	if streams < 2 && c.err == nil {
		c.fail("altup_num_inputs", "must be at least 2 (got %d): AltUp predicts the other streams from the active one", streams)
	}
	_, stated := c.raw["altup_coef_clip"]
	coefClip := c.has("altup_coef_clip") || !stated // default 120.0; null: no clamp
	if coefClip {
		c.number("altup_coef_clip", 120)
	}
	if c.flag("attention_bias", false) {
		c.fail("attention_bias", "is not modelled for Gemma 3n (got true; the released models have none)")
	}
	if hidden%heads != 0 && c.err == nil {
		c.fail("hidden_size", "(%d) must be a multiple of num_attention_heads (%d), as Gemma3nTextConfig checks", hidden, heads)
	}
	c.object("rope_parameters")
	var types []bool
	if c.has("layer_types") {
		types = c.layerTypes(layers, "full_attention", "sliding_attention")
	} else {
		types = make([]bool, layers)
		for i := range types {
			types[i] = (i+1)%5 == 0
		}
	}
	store, shared := c.gemma4SharedKV(types, nShared)
	ff := 0.0
	for _, w := range inter {
		ff += 3 * float64(hidden) * float64(w)
	}
	n, d := float64(streams), float64(hidden)
	altup := d*n + n*n*n + 2*d*float64(rank) // modality_router, prediction_coefs, LAuReL
	c.checkTotal(ff + float64(layers)*(2*d*float64(heads*hd)+float64(pleVocab+hidden)*float64(ple)+altup) + 2*(n-1)*d*d + float64(vocab)*d)
	if c.err != nil {
		return nil
	}
	gateAct := map[string]string{"geglu": "gelu", "swiglu": "silu"}[act]
	type kind struct {
		full, store, shared bool
		inter               int64
		sparsity            float64
	}
	built := map[kind]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := kind{types[i], store[i], shared[i], inter[i], sparsity[i]}
		if built[k] == nil {
			a := &nn.Gemma4Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HD: hd, Impl: attn, Window: window, Dropout: drop,
				EnableGQA: true, KV: "sliding_attention", StoreKV: k.store, SharedKV: k.shared, RopeTables: "rotary_emb", EagerMask: true}
			if k.full {
				a.Window, a.KV = 0, "full_attention"
			}
			c.checkLayer(a, nil) // the kernel's check names attn=
			built[k] = &nn.Gemma3nLayer{Dim: hidden, Streams: streams, LaurelRank: rank, CoefClip: coefClip,
				CorrectScale: c.flag("altup_correct_scale", true), Attn: a,
				MLP:      &nn.MLP{Name: "mlp", Dim: hidden, Hidden: k.inter, Act: act, Sparsity: k.sparsity},
				PerLayer: &nn.Gemma4PerLayer{Dim: hidden, PLE: ple, Act: gateAct}}
		}
		blocks[i] = built[k]
	}
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{
		&nn.Gemma4Embed{Vocab: vocab, Dim: hidden, PLEVocab: pleVocab, PLE: ple, Layers: layers}, // ClampIDs: setGemma3nIDs
		&nn.AltUpStreams{Dim: hidden, Streams: streams},
		stackBlocks("layers", blocks),
		&nn.AltUpStreams{Dim: hidden, Streams: streams, Unembed: true},
		&nn.Gemma4Norm{Name: "norm", Dim: hidden},
	}
	m := c.finish(head, ls, vocab, tie)
	if head == headCausalLM {
		m.LogitSoftcap = logitCap
	}
	return m
}

// perLayerSizes reads key as one positive integer for every layer or a
// list of one per layer (Gemma3nTextConfig's intermediate_size), def when
// absent.
func (c *hfConfig) perLayerSizes(key string, def, layers int64) []int64 {
	out := make([]int64, max(layers, 0))
	for i := range out {
		out[i] = def
	}
	c.perLayer(key, layers, func(i int, v any) bool {
		n, ok := v.(json.Number)
		x, err := n.Int64()
		if !ok || err != nil || x <= 0 || x > maxHFDim {
			c.fail(key, "%smust be a positive integer (got %s)", entry(i), describeJSON(v))
			return false
		}
		for j := range out {
			if i < 0 || j == i {
				out[j] = x
			}
		}
		return true
	})
	return out
}

// gemma3nSparsity reads activation_sparsity_pattern: one fraction in
// [0, 1) per layer (Gemma3nTextConfig.__post_init__ takes the list's
// length: one number fails there); absent or null, 0.95 for the first 10
// layers of a model of more than 10, else none.
func (c *hfConfig) gemma3nSparsity(layers int64) []float64 {
	const key = "activation_sparsity_pattern"
	out := make([]float64, max(layers, 0))
	for i := range out {
		if layers > 10 && i < 10 {
			out[i] = 0.95
		}
	}
	if _, isList := c.raw[key].([]any); c.has(key) && !isList {
		c.fail(key, "must list one sparsity per layer (%d; got %s)", layers, describeJSON(c.raw[key]))
		return out
	}
	c.perLayer(key, layers, func(i int, v any) bool {
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || f < 0 || f >= 1 || math.IsNaN(f) {
			c.fail(key, "%smust be a fraction in [0, 1) (got %s)", entry(i), describeJSON(v))
			return false
		}
		out[i] = f
		return true
	})
	return out
}

// entry names entry i of a per-layer list in an error ("" for i < 0, the
// one value for every layer).
func entry(i int) string {
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("entry %d ", i)
}

// perLayer hands set each layer's entry of key, a list of one per layer
// (i its index) or one value for all (i -1; nothing when key is absent or
// null); set returns false to stop at an entry it refused.
func (c *hfConfig) perLayer(key string, layers int64, set func(i int, v any) bool) {
	if !c.has(key) {
		return
	}
	list, isList := c.raw[key].([]any)
	if !isList {
		set(-1, c.raw[key])
		return
	}
	if int64(len(list)) != layers {
		c.fail(key, "must be one value, or one per layer (%d; got a list of %d)", layers, len(list))
		return
	}
	for i, v := range list {
		if !set(i, v) {
			return
		}
	}
}

// gemma3nSince is why Gemma 3n is modelled from transformers 5.6 only.
const gemma3nSince = "before 5.6 the layers that share keys and values have k_proj and v_proj and, trained without a cache, compute their own"

// gemma3nClampIDsSince is the first release whose Gemma 3n sets the ids
// outside vocab_size_per_layer_input to 0 before the per-layer lookup
// (get_per_layer_inputs' torch.where: a new int64 tensor the lookup
// saves): the 5.21.0 wheel; 5.20.0 reads the ids as they are (an id past
// the table fails there). From 5.6 to 5.22 the AltUp streams' magnitude
// is sqrt(torch.maximum(mean, eps)) where 5.23 clamps: the same tensors
// kept but a 0-dim eps, not counted.
var gemma3nClampIDsSince = [2]int{5, 21}

// setGemma3nIDs sets the per-layer lookup's id clamping by release.
func setGemma3nIDs(layers []core.Layer, clamp bool) {
	for _, l := range layers {
		if e, ok := l.(*nn.Gemma4Embed); ok {
			e.ClampIDs = clamp
		}
	}
}
