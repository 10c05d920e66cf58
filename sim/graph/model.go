package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// EncoderProcessorDecoder is anemoi's encoder-processor-decoder weather
// model (AnemoiModelEncProcDec, and with noise AnemoiEnsModelEncProcDec:
// models/ens_encoder_processor_decoder.py@models-0.8.1 l.103-187): a graph
// transformer encoder from the grid to the hidden mesh, a processor over
// the mesh, a graph transformer decoder back to the grid.
//
// Rows. The model reads [batch, points, inputs] fp32: one row per grid
// point of each sample (members folded into the batch when stacked), so a
// plan's seq is the grid's points (Model.Points) and rows = batch *
// members * points. Inside, every tensor is [rows, features]: B*N rows on
// the grid side, B*M on the mesh side (B samples, N points, M mesh nodes).
//
// Forward, as the ensemble model runs it:
//
//  1. _assemble_input: the node attributes of the grid (sin/cos of lat and
//     lon, 4 columns, plus NodeAttrs trainable columns per node,
//     NamedNodesAttributes) are concatenated to the inputs: x_data_latent,
//     fp32 [B*N, inputs + 4 + NodeAttrs]. It is the input of the encoder
//     and of the decoder checkpoints, so it lives until the encoder's
//     backward.
//  2. the hidden node attributes, fp32 [B*M, 4 + NodeAttrs];
//  3. the encoder (checkpointed), giving x_latent [B*M, C];
//  4. noise: NoiseConditioning draws fp32 noise [B*M, NoiseChannels] and
//     runs it through a checkpointed MLP (Linear, GELU, Linear, LayerNorm);
//     the result conditions the processor's layer norms;
//  5. the processor, then x_latent_proc + x_latent;
//  6. the decoder (checkpointed) to [B*N, outputs];
//  7. _assemble_output: .to(fp32).clone() to [B, N, outputs] fp32.
//
// The graph's buffers (3 fp32 fixed attributes and 2 int64 indices per
// edge, 28 bytes; 4 fp32 coordinates per node, 16 bytes: 0.2 GB for Bris)
// are on the device from setup (buffers.go); with Data, the data
// loader's batch is the program input, held for the step, and the model
// input is built from it and freed when the forward ends (core/data_batch.go).
// Not modelled: the prognostic residual x_out[..., idx] += x_skip (an
// [B*N, prognostic] indexing copy).
type EncoderProcessorDecoder struct {
	Name          string
	Grid, Mesh    *NodeSet
	Encoder       *GraphTransformer
	Processor     MeshProcessor // TransformerProcessor or GraphTransformerProcessor
	Decoder       *GraphTransformer
	Inputs        int64           // fp32 features per grid point and sample the model reads
	Outputs       int64           // variables predicted per grid point
	NodeAttrs     int64           // trainable attributes per node (trainable_parameters.data / hidden: 8)
	NoiseChannels int64           // noise_channels_dim (4); 0: no noise injection
	NoiseHidden   int64           // noise_mlp_hidden_dim (32)
	Data          *core.DataBatch // the data loader's batch the input is built from; nil: the input alone
	Version       Version         // the anemoi-models release replayed (version.go); zero: 0.8.1
	// KeepBatchSharded is model.keep_batch_sharded (default True): under
	// the edge sharding of 0.17.0 and later each GPU of the model reads
	// and predicts its rows of the grid (shard_edges.go).
	KeepBatchSharded bool
}

// coordAttrs is NamedNodesAttributes' fixed part: sin and cos of (lat, lon).
const coordAttrs = 4

// NewEncoderProcessorDecoder checks that the parts fit together and returns
// the model layer with its encoder, decoder and processor configured for
// their roles (copies: the given layers are left as they are).
func NewEncoderProcessorDecoder(e EncoderProcessorDecoder) (*EncoderProcessorDecoder, error) {
	path := e.Name
	if e.Grid == nil || e.Mesh == nil || e.Encoder == nil || e.Processor == nil || e.Decoder == nil {
		return nil, units.Errorf(path, "encoder_processor_decoder needs a grid, a mesh, an encoder, a processor and a decoder")
	}
	if e.Grid.Kind != "grid" {
		return nil, units.Errorf(path, "grid must be a grid (got %s)", e.Grid)
	}
	if e.Mesh.Kind != "mesh" {
		return nil, units.Errorf(path, "mesh must be a mesh (got %s)", e.Mesh)
	}
	for _, f := range []struct {
		what string
		n    int64
	}{{"inputs", e.Inputs}, {"outputs", e.Outputs}} {
		if err := core.Positive(path, f.what, f.n); err != nil {
			return nil, err
		}
	}
	if e.NodeAttrs < 0 || e.NoiseChannels < 0 || (e.NoiseChannels > 0 && e.NoiseHidden <= 0) {
		return nil, units.Errorf(path, "node_attrs and noise_channels must be >= 0 and noise_hidden positive (got %d, %d, %d)", e.NodeAttrs, e.NoiseChannels, e.NoiseHidden)
	}
	if e.Data != nil {
		if err := e.Data.Validate(path); err != nil {
			return nil, err
		}
	}
	if e.Encoder.Edges == nil || e.Decoder.Edges == nil {
		return nil, units.Errorf(path, "encoder and decoder need edges")
	}
	if !sameNodes(e.Encoder.Edges.Src, e.Grid) || !sameNodes(e.Encoder.Edges.Dst, e.Mesh) {
		return nil, &units.Error{Path: path, Msg: fmt.Sprintf("the encoder maps %s onto %s, but the model's grid and mesh are %s and %s",
			e.Encoder.Edges.Src, e.Encoder.Edges.Dst, e.Grid, e.Mesh), Hint: "the encoder's edges go from the grid to the mesh, e.g. knn_edges(grid, mesh, 12)"}
	}
	if !sameNodes(e.Decoder.Edges.Src, e.Mesh) || !sameNodes(e.Decoder.Edges.Dst, e.Grid) {
		return nil, &units.Error{Path: path, Msg: fmt.Sprintf("the decoder maps %s onto %s, but it must map the mesh %s onto the grid %s",
			e.Decoder.Edges.Src, e.Decoder.Edges.Dst, e.Mesh, e.Grid), Hint: "the decoder's edges go from the mesh to the grid, e.g. knn_edges(mesh, grid, 3)"}
	}
	if !sameNodes(e.Processor.mesh(), e.Mesh) {
		return nil, units.Errorf(path, "the processor runs over %s, but the model's mesh is %s", e.Processor.mesh(), e.Mesh)
	}
	c := e.Processor.channels()
	if e.Encoder.Channels != c || e.Decoder.Channels != c {
		return nil, units.Errorf(path, "encoder, processor and decoder must have the same channels (got %d, %d, %d)", e.Encoder.Channels, c, e.Decoder.Channels)
	}
	enc, dec := *e.Encoder, *e.Decoder
	enc.Role, enc.SrcIn, enc.DstIn, enc.Version = "encoder", e.dataWidth(), coordAttrs+e.NodeAttrs, e.Version
	dec.Role, dec.DstIn, dec.Out, dec.Version = "decoder", e.dataWidth(), e.Outputs, e.Version
	enc.KeepBatchSharded, dec.KeepBatchSharded = e.KeepBatchSharded, e.KeepBatchSharded
	e.Encoder, e.Decoder, e.Processor = &enc, &dec, e.Processor.Conditioned(e.NoiseChannels)
	if p, ok := e.Processor.(*GraphTransformerProcessor); ok { // a copy: Conditioned
		p.Version = e.Version
		if err := checkBackendRelease(core.ChildPath(path, &e, p), p.Backend, e.Version); err != nil {
			return nil, err
		}
	}
	for _, g := range []*GraphTransformer{&enc, &dec} {
		if err := checkBackendRelease(core.ChildPath(path, &e, g), g.Backend, e.Version); err != nil {
			return nil, err
		}
	}
	for _, l := range []core.Layer{e.Encoder, e.Processor, e.Decoder} {
		if err := l.Validate(core.ChildPath(path, &e, l)); err != nil {
			return nil, err
		}
	}
	return &e, nil
}

// NewGraphModel is the model (sim.Model) around an encoder-processor-decoder,
// with loss "crps" (ensembles) or "mse".
func NewGraphModel(e *EncoderProcessorDecoder, loss string) *core.Model {
	return &core.Model{Name: e.Name, Layers: []core.Layer{e}, Loss: loss, InputDim: e.Inputs, Points: e.Grid.Nodes, Data: e.Data,
		ShardedPoints: e.KeepBatchSharded && e.Version.EdgeSharded()}
}

// dataWidth is x_data_latent's width: inputs plus the grid's node attributes.
func (e *EncoderProcessorDecoder) dataWidth() int64 { return e.Inputs + coordAttrs + e.NodeAttrs }

func (e *EncoderProcessorDecoder) Kind() string  { return "encoder_processor_decoder" }
func (e *EncoderProcessorDecoder) Label() string { return e.Name }
func (e *EncoderProcessorDecoder) InDim() int64  { return e.Inputs }
func (e *EncoderProcessorDecoder) OutDim() int64 { return e.Outputs }
func (e *EncoderProcessorDecoder) Children() []core.Layer {
	return []core.Layer{e.Encoder, e.Processor, e.Decoder}
}

// Params adds the trainable node attributes of grid and mesh and the noise
// MLP to the three parts.
func (e *EncoderProcessorDecoder) Params() int64 {
	n := e.Encoder.Params() + e.Processor.Params() + e.Decoder.Params()
	return n + e.NodeAttrs*(e.Grid.Nodes+e.Mesh.Nodes) + e.noiseParams()
}

func (e *EncoderProcessorDecoder) noiseParams() int64 {
	nc, h := e.NoiseChannels, e.NoiseHidden
	if nc == 0 {
		return 0
	}
	return nc*h + h + h*nc + nc + 2*nc
}

func (e *EncoderProcessorDecoder) Summary() string {
	return fmt.Sprintf("%s (%d points) -> %s (%d nodes) -> %s, %d inputs, %d outputs",
		e.Grid.Name, e.Grid.Nodes, e.Mesh.Name, e.Mesh.Nodes, e.Grid.Name, e.Inputs, e.Outputs)
}

func (e *EncoderProcessorDecoder) Validate(path string) error {
	for _, l := range e.Children() {
		if err := l.Validate(core.ChildPath(path, e, l)); err != nil {
			return err
		}
	}
	return nil
}

func (e *EncoderProcessorDecoder) Lower(b *core.Builder, x core.Value) core.Value {
	s := b.Shape(x)
	n, m := e.Grid.Nodes, e.Mesh.Nodes
	edge := e.Version.EdgeSharded() && shards(b) > 1 // shard_edges.go
	pts := n                                         // the grid rows this GPU reads
	if edge && e.KeepBatchSharded {
		pts = localRows(n, shards(b))
	}
	if len(s) != 3 || s[1] != pts || s[2] != e.Inputs {
		panic(core.LowerError{Err: units.Errorf(e.Name, "encoder_processor_decoder reads [batch, %d points, %d inputs] (got %v)", pts, e.Inputs, s)})
	}
	batch := s[0]
	e.checkWrapped(b)
	c := e.Processor.channels()
	for _, g := range []*GraphTransformer{e.Encoder, e.Decoder} {
		if !core.ProductFits(batch, g.Edges.Count, c, 8) || !core.ProductFits(batch, n, e.dataWidth()+c, 8) {
			panic(core.LowerError{Err: &units.Error{Path: e.Name, Msg: fmt.Sprintf("a batch of %d samples makes tensors too large to count in bytes (%d edges x %d channels)", batch, g.Edges.Count, c)}})
		}
	}
	e.coordinateBuffer(b, e.Grid)
	e.coordinateBuffer(b, e.Mesh)
	xd := e.nodeAttributes(b, "data", e.Grid, batch)
	if pts != n {
		xd = shardView(b, xd, pts, "this GPU's rows of the grid node attributes (_assemble_input's shard_tensor)")
	}
	xd = b.Ew("cat", "x_data_latent", []core.Value{x, xd}, []int64{batch * pts, e.dataWidth()}, b.Dtype(x),
		"x_data_latent: inputs and grid node attributes (_assemble_input), held for the encoder and decoder checkpoints")
	xh := e.nodeAttributes(b, "hidden", e.Mesh, batch)
	xhAll := xh
	if edge {
		xh = shardView(b, xh, localRows(m, shards(b)), "this GPU's rows of the hidden node attributes (shard_tensor)")
	}
	xl := e.Encoder.lowerMapper(b, xd, xh, batch)
	cond := core.NoValue
	if e.NoiseChannels > 0 {
		cond = e.noise(b, localRows(batch*m, shards(b))) // for this rank's mesh rows under model sharding
	}
	xp := e.Processor.lowerCond(b, xl, cond)
	xp = b.Add("x_latent_proc", xp, xl)
	y := e.Decoder.lowerMapper(b, xp, xd, batch)
	if !edge { // the edge-sharded decoder gathers its output itself (mapper_partitioned.go)
		y = gatherAllRows(b, y, batch*n, "decoder output rows of every GPU of the model (post_process gather_tensor, shard.go)")
	}
	if edge {
		b.KeepAlive("x_hidden_latent", xhAll) // a local of forward: the shard's storage
	}
	y = b.Cast(y, units.FP32, "decoder output .to(fp32) (_assemble_output)")
	return b.Ew("clone", "y_pred", []core.Value{y}, []int64{batch, pts, e.Outputs}, units.FP32, "model output .clone() (_assemble_output)")
}

// nodeAttributes lowers NamedNodesAttributes.forward: the coordinate
// buffer and the trainable [nodes, NodeAttrs] parameter repeated over the
// batch and concatenated (TrainableTensor).
func (e *EncoderProcessorDecoder) nodeAttributes(b *core.Builder, name string, nodes *NodeSet, batch int64) core.Value {
	done := b.Scope("node_attributes." + name)
	var params []int32
	if e.NodeAttrs > 0 {
		params = append(params, b.Param("trainable", []int64{nodes.Nodes, e.NodeAttrs}, "node_attr"))
	}
	w := coordAttrs + e.NodeAttrs
	i := b.AddOp("cat", "attributes", nil, params...)
	y := b.Out(i, "attributes", []int64{batch * nodes.Nodes, w}, units.FP32, "node attributes of "+nodes.Name+" repeated over the batch (TrainableTensor)")
	b.Op(i).WorkF = units.FP32.Bytes(batch * nodes.Nodes * w) // the repeats, alive until the cat
	done()
	return y
}

// noise lowers NoiseConditioning.forward (layers/ensemble.py@models-0.8.1):
// torch.randn in the dtype of the hidden node attributes (fp32), then the
// checkpointed noise MLP.
func (e *EncoderProcessorDecoder) noise(b *core.Builder, rows int64) core.Value {
	defer b.Scope("noise_injector")()
	nc := e.NoiseChannels
	z := b.Ew("randn", "noise", nil, []int64{rows, nc}, units.FP32, "noise for the ensemble (torch.randn, fp32)")
	b.Val(z).Grad = false
	defer b.Scope("noise_mlp")()
	defer b.BeginRegion("")()
	h := b.Linear("mlp.0", "noise", z, nc, e.NoiseHidden, true)
	h = nn.Activation(b, "gelu", h)
	h = b.Linear("mlp.2", "noise", h, e.NoiseHidden, nc, true)
	return b.LayerNorm("layer_norm", h, nc, true)
}
