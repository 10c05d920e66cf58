package nn

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// zamba2EmbedKey names Zamba2's copy of the embeddings among the values a
// lowering shares (core.Builder.Share).
const zamba2EmbedKey = "zamba2.original_hidden_states"

// Zamba2Embed is Zamba2Model's embedding (models/zamba2/modeling_zamba2.py
// at 5.25.0): embed_tokens, and original_hidden_states =
// torch.clone(inputs_embeds), a copy every hybrid layer's shared
// transformer concatenates to its input, alive from the embedding to the
// last hybrid layer (a clone saves nothing).
type Zamba2Embed struct {
	Vocab, Dim int64
}

func (e *Zamba2Embed) Kind() string                   { return "zamba2_embed" }
func (e *Zamba2Embed) Label() string                  { return "" }
func (e *Zamba2Embed) DefaultName() string            { return "" } // its module sits in the model
func (e *Zamba2Embed) Children() []core.Layer         { return nil }
func (e *Zamba2Embed) Params() int64                  { return e.Vocab * e.Dim }
func (e *Zamba2Embed) OutDim() int64                  { return e.Dim }
func (e *Zamba2Embed) LookupShape() (rows, dim int64) { return e.Vocab, e.Dim }
func (e *Zamba2Embed) Summary() string                { return fmt.Sprintf("%d x %d, and a copy", e.Vocab, e.Dim) }

func (e *Zamba2Embed) Validate(path string) error {
	return (&Embedding{Rows: e.Vocab, Dim: e.Dim}).Validate(path)
}

// Modules: the embeddings are the model's module.
func (e *Zamba2Embed) Modules() []core.ModuleRow {
	return []core.ModuleRow{layerRow("embed_tokens", &Embedding{Rows: e.Vocab, Dim: e.Dim})}
}

// CheckLayout: see Zamba2Hybrid.
func (e *Zamba2Embed) CheckLayout(path string, par core.Parallelism) error {
	return zamba2Layout(path, par)
}

func (e *Zamba2Embed) Lower(b *core.Builder, ids core.Value) core.Value {
	x := (&Embedding{Name: "embed_tokens", Rows: e.Vocab, Dim: e.Dim}).Lower(b, ids)
	c := b.Ew("clone", "original_hidden_states", []core.Value{x}, b.Shape(x), b.Dtype(x),
		"torch.clone(inputs_embeds): the embeddings every shared transformer concatenates to its input")
	b.Share(zamba2EmbedKey, c)
	return x
}

// zamba2Layout refuses the layouts not modelled for Zamba2's shared
// blocks: their weights are tied across layers by name and their
// adapters and wider attention are not split.
func zamba2Layout(path string, par core.Parallelism) error {
	if par.TP > 1 || par.PP > 1 {
		return &units.Error{Path: path, Msg: "tensor and pipeline parallelism are not modelled for Zamba2's shared transformer blocks",
			Hint: "use tp=1 and pp=1 (FSDP shards them)"}
	}
	return nil
}

// Zamba2Hybrid is a Zamba2HybridLayer (modeling_zamba2.py at 5.25.0): the
// shared transformer block of its hybrid layer, then a linear, then the
// layer's own Mamba-2 decoder layer, whose input the block's output is
// added to:
//
//	h = cat([x, original_hidden_states], -1)                 [.., 2 x dim]
//	h = self_attn(input_layernorm(h))                        q, k, v from 2 x dim, o_proj to dim
//	t = linear(feed_forward(pre_ff_layernorm(h)))            no residual inside the block
//	y = x + mamba(input_layernorm(x + t))                    (mamba_decoder)
//
// The block's weights (attention, feed_forward, both norms) are those of
// the first hybrid layer of its block (First): transformers ties every
// num_mem_blocks-th hybrid layer's shared_transformer to it
// (_tied_weights_keys, get_layers), so a later layer's are tied to that
// layer's (core.Builder.TieModule), autocast casting them once. Each
// call adds its own adapters (AdapterIndex, its place among the hybrid
// layers: Attention.AdapterRank, Zamba2MLP), which transformers holds in
// the first layer's adapter lists.
type Zamba2Hybrid struct {
	Dim   int64
	First int64 // the index of the layer whose shared_transformer owns the weights
	Own   bool  // this layer is First
	// Calls is how many hybrid layers run the block, where Own: its
	// module holds every call's adapters (the others' tied to them), so
	// its row and Params count them all, a later layer's none.
	Calls int64
	Attn  *Attention
	MLP   *Zamba2MLP
	Mamba *Mamba2 // mamba_decoder.mamba
}

func (l *Zamba2Hybrid) Kind() string           { return "zamba2_hybrid" }
func (l *Zamba2Hybrid) Label() string          { return "" }
func (l *Zamba2Hybrid) DefaultName() string    { return "" } // its modules sit in the decoder layer
func (l *Zamba2Hybrid) Children() []core.Layer { return []core.Layer{l.Mamba} }
func (l *Zamba2Hybrid) InDim() int64           { return l.Dim }
func (l *Zamba2Hybrid) OutDim() int64          { return l.Dim }

// shared is what this layer's shared_transformer counts: where it owns
// the block, its weights and norms and every call's adapters (as
// named_parameters() names them, under the first layer's
// linear_q_adapter_list.{i}, gate_up_proj_adapter_list.{i}, ...); else
// none.
func (l *Zamba2Hybrid) shared() int64 {
	if !l.Own {
		return 0
	}
	adapters := l.Attn.AdapterParams() + l.MLP.adapterParams()
	return l.Attn.Params() + l.MLP.Params() - adapters + l.Calls*adapters + 3*l.Dim
}

func (l *Zamba2Hybrid) Params() int64 {
	return l.shared() + l.Dim*l.Dim + l.Dim + l.Mamba.Params()
}

func (l *Zamba2Hybrid) Summary() string {
	s := fmt.Sprintf("shared block of layer %d, then mamba", l.First)
	if l.Own {
		s = "shared block, then mamba"
	}
	return s
}

// Modules: the shared transformer (the rows of what this layer counts of
// it), the linear and the Mamba decoder's norm; the mixer is a child.
func (l *Zamba2Hybrid) Modules() []core.ModuleRow {
	return []core.ModuleRow{
		{Path: "shared_transformer", Kind: "zamba2_shared", Summary: l.Summary(), Params: l.shared()},
		layerRow("linear", &Linear{In: l.Dim, Out: l.Dim}),
		layerRow("mamba_decoder.input_layernorm", &Norm{Dim: l.Dim, RMS: true}),
	}
}

func (l *Zamba2Hybrid) Validate(path string) error {
	if l.Attn == nil || l.MLP == nil || l.Mamba == nil {
		return units.Errorf(path, "a Zamba2 hybrid layer needs its attention, MLP and Mamba mixer")
	}
	if l.First < 0 || l.Own && l.Calls < 1 {
		return units.Errorf(path, "first must be a layer index and calls positive where the layer owns the block (got %d, %d)", l.First, l.Calls)
	}
	for _, d := range []int64{l.Attn.Dim, l.MLP.Dim, l.Mamba.Dim, l.Attn.InDim() / 2} {
		if d != l.Dim {
			return units.Errorf(path, "the attention (%d, reading %d), MLP (%d) and mixer (%d) must be the layer's width %d, the attention reading twice it",
				l.Attn.Dim, l.Attn.InDim(), l.MLP.Dim, l.Mamba.Dim, l.Dim)
		}
	}
	if err := l.Attn.Validate(path + ".shared_transformer.self_attn"); err != nil {
		return err
	}
	if err := l.MLP.Validate(path + ".shared_transformer.feed_forward"); err != nil {
		return err
	}
	return l.Mamba.Validate(path + ".mamba_decoder.mamba")
}

// CheckLayout: see zamba2Layout.
func (l *Zamba2Hybrid) CheckLayout(path string, par core.Parallelism) error {
	return zamba2Layout(path, par)
}

func (l *Zamba2Hybrid) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != l.Dim {
		panic(core.ShapeMismatch(b, "zamba2_hybrid", l.Dim, b.Last(x)))
	}
	orig, ok := b.SharedValue(zamba2EmbedKey)
	if !ok {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "a Zamba2 hybrid layer without the embeddings' copy",
			Hint: "the model's embedding must be Zamba2's (hf_config builds it)"}})
	}
	here := b.Name("")
	first := here[:strings.LastIndexByte(here, '.')+1] + strconv.FormatInt(l.First, 10)
	params, ops := len(b.P.Params), len(b.P.Ops)
	done := b.Scope("shared_transformer")
	s, dt := b.Shape(x), b.Dtype(x)
	h := b.Ew("cat", "cat", []core.Value{x, orig}, core.WithLast(s, 2*l.Dim), dt,
		"the hidden states and the embeddings' copy concatenated (the shared transformer's input)")
	h = (&Norm{Name: "input_layernorm", Dim: 2 * l.Dim, RMS: true}).Lower(b, h)
	h = b.LowerChild(l.Attn, h)
	h = (&Norm{Name: "pre_ff_layernorm", Dim: l.Dim, RMS: true}).Lower(b, h)
	h = b.LowerChild(l.MLP, h)
	done()
	b.TieModule(params, ops, here+".shared_transformer", first+".shared_transformer")
	t := b.Linear("linear", core.Role("linear"), h, l.Dim, l.Dim, false)
	// Zamba2MambaDecoderLayer's forward; its mixer, l.Mamba, is named
	// from the hybrid layer (mamba_decoder.mamba: describe()'s child).
	done = b.Scope("mamba_decoder")
	m := b.Add("transformer_hidden_states", x, t)
	m = (&Norm{Name: "input_layernorm", Dim: l.Dim, RMS: true}).Lower(b, m)
	done()
	m = b.LowerChild(l.Mamba, m)
	done = b.Scope("mamba_decoder")
	defer done()
	return b.Add("residual", x, m)
}

// Zamba2MLP is the shared transformer's feed_forward (Zamba2MLP at
// 5.25.0): gate_up_proj (dim to 2 x hidden) plus this call's
// gate_up_proj_adapter_list.{AdapterIndex} (zamba2_adapter.go),
// torch.chunk's halves, act(gate) * up, down_proj; add_bias_linear
// biases both projections.
type Zamba2MLP struct {
	Name                      string
	Dim, Hidden               int64
	AdapterRank, AdapterIndex int64
	AdapterIdle               []int64 // the block's other calls' adapter slots (idleRankAdapters)
	Act                       string  // swiglu or geglu
	Bias                      bool
}

func (m *Zamba2MLP) Kind() string           { return "mlp" }
func (m *Zamba2MLP) Label() string          { return m.Name }
func (m *Zamba2MLP) DefaultName() string    { return "feed_forward" }
func (m *Zamba2MLP) Children() []core.Layer { return nil }
func (m *Zamba2MLP) InDim() int64           { return m.Dim }
func (m *Zamba2MLP) OutDim() int64          { return m.Dim }
func (m *Zamba2MLP) adapterParams() int64   { return m.AdapterRank * (m.Dim + 2*m.Hidden) }

func (m *Zamba2MLP) Params() int64 {
	n := 3*m.Dim*m.Hidden + m.adapterParams()
	if m.Bias {
		n += 2*m.Hidden + m.Dim
	}
	return n
}

func (m *Zamba2MLP) Summary() string {
	return fmt.Sprintf("%d -> 2x%d (gate_up_proj, adapter rank %d) -> %d, %s", m.Dim, m.Hidden, m.AdapterRank, m.Dim, m.Act)
}

func (m *Zamba2MLP) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, m.Dim}, sized{FieldHidden, m.Hidden}); err != nil {
		return err
	}
	if m.AdapterRank < 0 || m.AdapterIndex < 0 {
		return units.Errorf(path, "adapter_rank and adapter_index must be positive, or 0 (got %d, %d)", m.AdapterRank, m.AdapterIndex)
	}
	if m.Act != "swiglu" && m.Act != "geglu" {
		return units.Errorf(path, "a fused gated MLP's act must be swiglu or geglu (got %q)", m.Act)
	}
	return nil
}

func (m *Zamba2MLP) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "mlp", m.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(m))()
	gateUp := b.Linear("gate_up_proj", core.RoleUp, x, m.Dim, 2*m.Hidden, m.Bias)
	if m.AdapterRank > 0 {
		gateUp = rankAdapter(b, fmt.Sprintf("gate_up_proj_adapter_list.%d", m.AdapterIndex), x, gateUp, m.Dim, m.AdapterRank, 2*m.Hidden)
		idleRankAdapters(b, "gate_up_proj_adapter_list", m.AdapterIdle, m.Dim, m.AdapterRank, 2*m.Hidden)
	}
	h := gatedHalves(b, gateUp, m.Hidden, m.Act, "gate_up_proj")
	return b.Linear("down_proj", core.RoleDown, h, m.Hidden, m.Dim, m.Bias)
}
