package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// TransformerProcessor is anemoi's TransformerProcessor over the hidden
// mesh (layers/processor.py, layers/block.py TransformerProcessorBlock,
// layers/attention.py MultiHeadSelfAttention @models-0.8.1): Layers
// pre-norm blocks x + attention(LN(x)), x + MLP(LN(x)) with flash
// attention (window Window each side, 0 = global), lin_q/k/v without bias,
// optional per-head q/k layer norms (AutocastLayerNorm, cast back to the
// input dtype), and a GELU MLP of MLPRatio * Channels.
//
// Segments is the processor's num_chunks: the layers are split into that
// many ProcessorChunks and each runs under one activation checkpoint
// (BaseProcessor.run_layers), so the backward recomputes Layers/Segments
// layers at once.
//
// In an ensemble model (Cond > 0) the layer norms are ConditionalLayerNorm
// (layers/normalization.py, config transformer_ens.yaml with autocast:
// false): LayerNorm without affine, times (scale(noise) + 1), plus
// bias(noise), left in fp32.
type TransformerProcessor struct {
	Name     string
	Mesh     *NodeSet
	Layers   int64
	Channels int64
	Heads    int64
	MLPRatio int64
	Window   int64 // flash-attn window_size each side; 0 = global attention
	Segments int64 // checkpoint segments (anemoi processor num_chunks)
	QKNorm   bool
	Cond     int64 // noise channels conditioning the layer norms (set by NewEncoderProcessorDecoder); 0 = nn.LayerNorm
	// CPUOffload is the processor's cpu_offload: its checkpoint segments'
	// saved tensors go to pinned host memory (runSegments).
	CPUOffload bool
	inModel    bool // the processor of an encoder_processor_decoder (Conditioned)
}

func (p *TransformerProcessor) Kind() string           { return "transformer_processor" }
func (p *TransformerProcessor) Label() string          { return p.Name }
func (p *TransformerProcessor) Children() []core.Layer { return nil }

// layerParams counts one TransformerProcessorBlock.
func (p *TransformerProcessor) layerParams() int64 {
	c, h := p.Channels, p.MLPRatio*p.Channels
	n := 3*c*c + c*c + c // lin_q, lin_k, lin_v (no bias); projection with bias
	if p.QKNorm && p.Heads > 0 {
		n += 2 * (c / p.Heads) // q_norm, k_norm: weight only (bias=False)
	}
	if p.Cond > 0 {
		n += 2 * 2 * (p.Cond*c + c) // two ConditionalLayerNorms: scale and bias Linear(cond, C)
	} else {
		n += 2 * 2 * c // two LayerNorms
	}
	return n + c*h + h + h*c + c // MLP with biases
}

func (p *TransformerProcessor) Params() int64 { return p.Layers * p.layerParams() }

func (p *TransformerProcessor) Summary() string {
	w := "global attention"
	if p.Window > 0 {
		w = fmt.Sprintf("window %d", p.Window)
	}
	return fmt.Sprintf("%d layers over %s, %d channels, %d heads, %s, %d checkpoint segments%s", p.Layers, p.meshName(), p.Channels, p.Heads, w, p.Segments, offloadSummary(p.CPUOffload))
}

func (p *TransformerProcessor) meshName() string {
	if p.Mesh == nil {
		return "?"
	}
	return p.Mesh.Name
}

func (p *TransformerProcessor) Validate(path string) error {
	if p.Mesh == nil {
		return units.Errorf(path, "transformer_processor needs a mesh")
	}
	if err := validateBlocks(path, p.Layers, p.Channels, p.Heads, p.MLPRatio, p.Segments); err != nil {
		return err
	}
	if p.Window < 0 {
		return units.Errorf(path, "window must be positive, or None for global attention (got %d)", p.Window)
	}
	return nil
}

// lower runs the processor on its own (no noise conditioning).
func (p *TransformerProcessor) Lower(b *core.Builder, x core.Value) core.Value {
	return p.lowerCond(b, x, core.NoValue)
}

// lowerCond runs the processor on x [batch * mesh nodes, channels],
// conditioned on cond [rows, Cond] when the model injects noise.
func (p *TransformerProcessor) lowerCond(b *core.Builder, x, cond core.Value) core.Value {
	if b.Last(x) != p.Channels {
		panic(core.ShapeMismatch(b, "transformer_processor", p.Channels, b.Last(x)))
	}
	defer b.Scope(processorName(p.Name))()
	// In a graph model, checkpoint(modules=["processor"]) wraps it (wrap.go);
	// a bare processor is wrapped by the model's own layer policy.
	wrapped := p.inModel && wraps(b, processorName(p.Name), p.Kind())
	if wrapped {
		defer b.BeginNestedRegion("")()
	}
	if g := shards(b); g > 1 && core.Rows(b.Shape(x)) != localRows(p.Mesh.Nodes, g) {
		panic(core.LowerError{Err: units.Errorf(b.Name(""), "processor rows (%d) are not this rank's share of the %d mesh nodes", core.Rows(b.Shape(x)), p.Mesh.Nodes)})
	}
	x = runSegments(b, x, p.Layers, p.Segments, p.CPUOffload, wrapped, func(x core.Value) core.Value { return p.block(b, x, cond) })
	return x
}

func (p *TransformerProcessor) block(b *core.Builder, x, cond core.Value) core.Value {
	h := p.norm(b, "layer_norm_attention", x, cond)
	x = b.Add("attention_residual", x, p.attention(b, h))
	h = p.norm(b, "layer_norm_mlp", x, cond)
	done := b.Scope("mlp")
	m := nn.Ffn(b, h, p.Channels, p.MLPRatio*p.Channels, "gelu", true)
	done()
	return b.Add("mlp_residual", x, m)
}

// norm is the block's layer norm (condNorm).
func (p *TransformerProcessor) norm(b *core.Builder, name string, x, cond core.Value) core.Value {
	return condNorm(b, name, x, cond, p.Channels, p.Cond)
}

// condNorm is nn.LayerNorm over c channels, or with noise (condDim > 0)
// ConditionalLayerNorm with autocast=False (layers/normalization.py
// @models-0.8.1): scale = Linear(cond), bias = Linear(cond), out = LN(x)
// * (scale + 1) + bias. The product saves the fp32 norm output and scale
// + 1; the norm saves its fp32 input copy; the output stays fp32.
func condNorm(b *core.Builder, name string, x, cond core.Value, c, condDim int64) core.Value {
	if cond == core.NoValue || condDim == 0 {
		return b.LayerNorm(name, x, c, true)
	}
	defer b.Scope(name)()
	scale := b.Linear("scale", "norm-cond", cond, condDim, c, true)
	bias := b.Linear("bias", "norm-cond", cond, condDim, c, true)
	plus := b.Ew("add", "scale_plus_one", []core.Value{scale}, b.Shape(scale), b.Dtype(scale), "scale + 1 of the conditional layer norm")
	n := normOver(b, "norm", x, c, false, false)
	return b.Add("shift", b.Mul("scaled", n, plus), bias)
}

// attention lowers MultiHeadSelfAttention.attention_computation
// (layers/attention.py@models-0.8.1 l.145-194) with flash attention.
// Under model sharding (shard.go) shard_heads all-to-alls query, key and
// value from this rank's rows to all the mesh's nodes for a G-th of the
// heads, the q/k norms and flash attention run on those, and
// shard_sequence brings the output back to this rank's rows for the
// projection.
func (p *TransformerProcessor) attention(b *core.Builder, x core.Value) core.Value {
	defer b.Scope("attention")()
	c, all := p.Channels, core.Rows(b.Shape(x))
	if shards(b) > 1 {
		all = p.Mesh.Nodes // one sample per GPU under model sharding
	}
	q := b.Linear("lin_q", core.RoleQ, x, c, c, false)
	k := b.Linear("lin_k", core.RoleK, x, c, c, false)
	v := b.Linear("lin_v", core.RoleV, x, c, c, false)
	q, k, v = headsToAllRows(b, "query", q, all), headsToAllRows(b, "key", k, all), headsToAllRows(b, "value", v, all)
	if p.QKNorm {
		q = headNorm(b, "q_norm", q, c/p.Heads)
		k = headNorm(b, "k_norm", k, c/p.Heads)
	}
	o := p.flash(b, q, k, v)
	o = rowsToAllHeads(b, "attention_out", o, all)
	return b.Linear("projection", core.RoleO, o, c, c, true)
}

// headNorm is AutocastLayerNorm(head_dim, bias=False) over each head of
// x: fp32 under autocast, then type_as the input.
func headNorm(b *core.Builder, name string, x core.Value, headDim int64) core.Value {
	n := normOver(b, name, x, headDim, true, false)
	return b.Cast(n, b.Dtype(x), name+" output cast back to the input dtype (AutocastLayerNorm type_as)")
}

// flash lowers flash_attn_func (flash-attn 2): saves q, k, v, the output and
// an fp32 logsumexp [batch, heads, nodes]; its backward keeps an fp32 dq
// accumulator and softmax_d (mha_bwd). A window bounds the keys per query
// to 2*window+1, which changes FLOPs, not memory.
func (p *TransformerProcessor) flash(b *core.Builder, q, k, v core.Value) core.Value {
	s := b.Shape(q)
	nodes := p.Mesh.Nodes
	r := core.Rows(s)
	if r%nodes != 0 {
		panic(core.LowerError{Err: units.Errorf(b.Name(""), "processor rows (%d) are not a multiple of the %d mesh nodes", r, nodes)})
	}
	batch, h, c := r/nodes, p.Heads/shards(b), b.Last(q) // a G-th of the heads under model sharding
	i := b.AddOp("attention", "flash_attention", []core.Value{q, k, v})
	o := b.Out(i, "attn_out", s, b.Dtype(q), "attention output")
	lse := b.Out(i, "logsumexp", []int64{batch, h, nodes}, units.FP32, "attention logsumexp (fp32, saved)")
	b.Val(lse).Grad = false
	b.Save(i, q, k, v, o, lse)
	b.Op(i).WorkB = units.FP32.Bytes(r*c) + units.FP32.Bytes(r*h)
	keys := nodes
	if p.Window > 0 && 2*p.Window+1 < nodes {
		keys = 2*p.Window + 1
	}
	b.Op(i).Flops = 4 * float64(r) * float64(keys) * float64(c)
	return o
}
