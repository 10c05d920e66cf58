package graph

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The graph an anemoi model carries as module buffers (buffers.go), on
// the device from the start of the run:
//
//   - each mapper and graph-transformer processor
//     (layers/mapper.py@models-0.8.1 l.158-162, the same in
//     layers/processor.py GraphEdgeMixin): edge_attr,
//     the fixed edge attributes [E, edge_dim - trainable] fp32
//     (edge_length, edge_dirs), edge_index_base [2, E] int64, and
//     edge_inc [2, 1] int64: 28 bytes per edge with anemoi's 3 fixed
//     columns; from 0.16.0 the StaticGraphProvider
//     (layers/graph_provider.py@models-0.16.0 l.167-176) sorts them by
//     destination node and keeps the permutation, perm [E] int64: 8
//     bytes more per edge;
//   - the model's NamedNodesAttributes (layers/graph.py@models-0.8.1
//     l.90-93): latlons_<nodes>, sin and cos of latitude and longitude,
//     [nodes, 4] fp32 for the grid and the mesh: 16 bytes per node.

// buffers registers a graph layer's edge buffers.
func (in edgeInputs) buffers(b *core.Builder) {
	e := in.set.Count
	if fixed := in.attrs - in.trainable; fixed > 0 {
		b.Buffer("edge_attr", []int64{e, fixed}, units.FP32, "fixed edge attributes of the layer's graph (register_buffer)")
	}
	b.Buffer("edge_index_base", []int64{2, e}, units.INT64, "edge index of the layer's graph (register_buffer)")
	b.Buffer("edge_inc", []int64{2, 1}, units.INT64, "edge index increment per stacked sample (register_buffer)")
	if in.sorted {
		b.Buffer("perm", []int64{e}, units.INT64, "the permutation that sorted the edges by destination node (StaticGraphProvider, register_buffer)")
	}
}

// coordinateBuffer registers a node set's sin/cos coordinates.
func (e *EncoderProcessorDecoder) coordinateBuffer(b *core.Builder, nodes *NodeSet) {
	b.Buffer("node_attributes.latlons_"+nodes.Name, []int64{nodes.Nodes, coordAttrs}, units.FP32,
		"sin and cos of the latitudes and longitudes of "+nodes.Name+" (NamedNodesAttributes, register_buffer)")
}
