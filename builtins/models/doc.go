// Package models holds the Starlark values and builtins that describe a
// network: layers (linear, attention, mlp, moe, norms, ...), their
// combinators (sequential, repeat, residual), model() and describe(),
// hf_config() for a Hugging Face config.json, graph weather models
// (grids, meshes, edges, mappers, processors, encoder_processor_decoder)
// and embedding tables. Each value wraps an immutable engine layer
// (sim/core, sim/nn, sim/graph) and remembers where the script declared it.
package models
