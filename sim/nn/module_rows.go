package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// The describe() rows (core.ModuleLister) of the blocks whose parameters
// sit in modules of the layer around them, named as transformers names
// them, each row the nn layer that module is where one is.

// layerRow is l's row at path.
func layerRow(path string, l core.Layer) core.ModuleRow {
	return core.ModuleRow{Path: path, Kind: l.Kind(), Summary: l.Summary(), Params: l.Params()}
}

// Modules: an inline MLP's projections are its parent's modules (OPT's
// fc1 and fc2); a split one's first projection is its module and the
// second its sibling's (BERT's intermediate and output.dense); any other
// MLP is a row of its own (nil).
func (m *MLP) Modules() []core.ModuleRow {
	proj := func(name, def string, in, out int64) core.ModuleRow {
		return layerRow(nameOr(name, def), &Linear{In: in, Out: out, Bias: m.Bias})
	}
	switch {
	case m.OutModule != "":
		in := proj("", core.ModuleName(m), m.Dim, m.Hidden)
		in.Kind, in.Summary = m.Kind(), fmt.Sprintf("%d -> %d, %s", m.Dim, m.Hidden, m.Act)
		if m.Act == "xielu" {
			in.Params += 2 // act_fn's alpha_p and alpha_n
		}
		return []core.ModuleRow{in, proj(m.OutModule+"."+nameOr(m.OutName, "fc2"), "", m.Hidden, m.Dim)}
	case !m.Inline:
		return nil
	case m.FusedName != "":
		return []core.ModuleRow{proj(m.FusedName, "", m.Dim, 2*m.Hidden), proj(m.OutName, "down_proj", m.Hidden, m.Dim)}
	case m.gated():
		return []core.ModuleRow{proj(m.GateName, "gate_proj", m.Dim, m.Hidden), proj(m.InName, "up_proj", m.Dim, m.Hidden), proj(m.OutName, "down_proj", m.Hidden, m.Dim)}
	}
	return []core.ModuleRow{proj(m.InName, "fc1", m.Dim, m.Hidden), proj(m.OutName, "fc2", m.Hidden, m.Dim)}
}

// Modules: Gemma4TextDecoderLayer's router, experts and the experts'
// two norms (post_feedforward_layernorm_1 is the dense MLP's).
func (g *Gemma4MoE) Modules() []core.ModuleRow {
	experts := g.moe().expertMLP()
	return []core.ModuleRow{
		{Path: "router", Kind: "router", Summary: fmt.Sprintf("%d -> %d experts, softmax, top-%d", g.Dim, g.Experts, g.TopK), Params: g.Dim*g.Experts + g.Dim + g.Experts},
		{Path: "experts", Kind: "experts", Summary: fmt.Sprintf("%d x (%d -> %d -> %d), %s", g.Experts, g.Dim, g.Hidden, g.Dim, g.Act), Params: g.Experts * experts.Params()},
		layerRow("post_feedforward_layernorm_2", &Gemma4Norm{Dim: g.Dim}),
		layerRow("pre_feedforward_layernorm_2", &Gemma4Norm{Dim: g.Dim}),
	}
}

// Modules: MllamaCrossAttentionDecoderLayer's modules and its two gates
// (parameters of the layer's own).
func (c *MllamaCrossBlock) Modules() []core.ModuleRow {
	rows := tensorModules(c.Kind(), func(fn tensorFn) { c.tensors(fn) })
	for i, r := range rows {
		switch r.Path {
		case "input_layernorm", "post_attention_layernorm":
			rows[i] = layerRow(r.Path, &Norm{Dim: c.Dim, RMS: true})
		case "cross_attn":
			rows[i].Kind, rows[i].Summary = "cross_attention", fmt.Sprintf("dim %d, %d heads, %d kv heads, head_dim %d", c.Dim, c.Heads, c.KVHeads, c.HeadDim)
		}
	}
	return append(rows, layerRow("mlp", c.mlp()))
}

// Modules: DebertaV2Encoder's rel_embeddings and LayerNorm.
func (r *RelEmbeddings) Modules() []core.ModuleRow {
	return []core.ModuleRow{
		layerRow("rel_embeddings", &Embedding{Rows: r.Rows, Dim: r.Dim}),
		layerRow("LayerNorm", &Norm{Dim: r.Dim, Bias: true}),
	}
}

// Modules: the hyper-connection's parameters (fn, base, scale) are its
// module's (attn_hc, ffn_hc); the sub-block's rows follow.
func (h *HyperConnection) Modules() []core.ModuleRow {
	return []core.ModuleRow{{Path: h.Module, Kind: h.Kind(), Summary: h.Summary(), Params: h.Params() - h.Inner.Params()}}
}

// Modules: Gemma3nTextDecoderLayer's AltUp and LAuReL modules and its four
// norms; the attention's, the MLP's and the per-layer block's rows follow.
func (l *Gemma3nLayer) Modules() []core.ModuleRow {
	d, n := l.Dim, l.Streams
	rows := []core.ModuleRow{
		{Path: "altup", Kind: "altup", Summary: fmt.Sprintf("%d streams of %d", n, d), Params: d + n*n + n*n*n + d*n + d},
		{Path: "laurel", Kind: "laurel", Summary: fmt.Sprintf("%d -> %d -> %d", d, l.LaurelRank, d), Params: 2*d*l.LaurelRank + d},
	}
	for _, norm := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
		rows = append(rows, layerRow(norm, &Gemma4Norm{Dim: d}))
	}
	return rows
}

// Modules: the per-layer block's gate, projection and norm are the
// decoder layer's modules.
func (g *Gemma4PerLayer) Modules() []core.ModuleRow {
	return []core.ModuleRow{
		layerRow("per_layer_input_gate", &Linear{In: g.Dim, Out: g.PLE}),
		layerRow("per_layer_projection", &Linear{In: g.PLE, Out: g.Dim}),
		layerRow("post_per_layer_input_norm", &Gemma4Norm{Dim: g.Dim}),
	}
}

// Modules: the embeddings and the per-layer projection are the model's
// modules.
func (e *Gemma4Embed) Modules() []core.ModuleRow {
	return []core.ModuleRow{
		layerRow("embed_tokens", &Embedding{Rows: e.Vocab, Dim: e.Dim}),
		layerRow("embed_tokens_per_layer", &Embedding{Rows: e.PLEVocab, Dim: e.Layers * e.PLE}),
		layerRow("per_layer_model_projection", &Linear{In: e.Dim, Out: e.Layers * e.PLE}),
		layerRow("per_layer_projection_norm", &Gemma4Norm{Dim: e.PLE}),
	}
}

// Modules: AltUp's projections, one a stream besides the first, are one
// module list of the model's.
func (a *AltUpStreams) Modules() []core.ModuleRow {
	return []core.ModuleRow{{Path: a.module(), Kind: "module_list", Summary: fmt.Sprintf("%d x linear %d -> %d", a.Streams-1, a.Dim, a.Dim), Params: a.Params()}}
}
