// Package graph models graph neural networks for weather as anemoi builds
// them: grids and meshes (icosahedral, stretched), the edges between them
// (k nearest neighbours, radius, multi-scale), graph-transformer mappers
// (encoder and decoder), transformer and graph-transformer processors, and
// anemoi's encoder-processor-decoder with its data batch, ensemble members
// and rollout steps.
//
// Lowering follows anemoi-models 0.8.1 and PyG as they allocate: every
// edge chunk scatters into a new tensor over all destination nodes,
// per-edge tensors are saved in every processor layer, checkpointed
// mappers and processor segments recompute in the backward, and the
// graph's edge indices and attributes are buffers on the device. Later
// releases differ where version.go says: from 0.9.0 the mappers chunk
// their destination nodes (mapper_chunked.go, mapper_partitioned.go), and
// model sharding is 0.8.1's head sharding (shard.go) or, from 0.17.0,
// the edge sharding of nodes and edges with the processor's halo exchange
// (shard_edges.go). Advise
// explains a graph model's failure in terms of the setting that changes
// the failing tensor (SEEDS.md story 1).
package graph
