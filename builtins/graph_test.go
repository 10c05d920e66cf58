package builtins

import "testing"

const graphPrelude = `
g = grid("g", 1000)
m = icosahedral_mesh("m", 3)
enc = graph_transformer(g, m, knn_edges(g, m, 4), 64, 4, chunks = 2)
dec = graph_transformer(m, g, knn_edges(m, g, 3), 64, 4)
proc = transformer_processor(m, 2, 64, 4, segments = 1)
model = encoder_processor_decoder("tiny", g, m, enc, proc, dec, inputs = 10, outputs = 5)
`

func TestGraphValues(t *testing.T) {
	runPreludeCases(t, graphPrelude, []evalCase{
		{expr: `g`, want: `grid("g", 1,000 nodes)`},
		{expr: `type(g), type(m), g.points, m.nodes, m.refinement, m.estimate`, want: `("grid", "mesh", 1000, 642, 3, False)`},
		{expr: `icosahedral_mesh("o", 6).nodes`, want: `40962`},
		{expr: `stretched_mesh("s", 7, 10, 0.00947)`, want: `mesh("s", 261,590 nodes, estimate)`},
		{expr: `stretched_grid("lam", 30, 70).regional_nodes`, want: `30`},
		{expr: `knn_edges(g, m, 4).count, knn_edges(g, m, 4).estimate`, want: `(2568, False)`},
		{expr: `radius_edges(g, m, 2.5)`, want: `radius_edges(g -> m, 1,605 edges, estimate)`},
		{expr: `multiscale_edges(m).count, multiscale_edges(mesh("h", 100)).count`, want: `(5040, 800)`},
		{expr: `knn_edges(g, m, 4).src == g`, want: `True`},
		{expr: `enc.kind, proc.kind, type(model)`, want: `("graph_transformer", "transformer_processor", "model")`},
		// Per layer: lin_key/query/value/self 4*(64² + 64) = 16,640, lin_edge
		// 3*64 + 64 = 256, projection 64² + 64 = 4,160, q/k norms 2*16, two
		// layer norms 2*128, node MLP 64*256 + 256 + 256*64 + 64 = 33,088:
		// 54,432 a layer.
		{expr: `graph_transformer_processor(multiscale_edges(m), 2, 64, 4, edge_attrs = 3, trainable_edge_attrs = 0).params`, want: `108864`},
		// Defaults: 11 edge attributes (lin_edge 512 more a layer) of which 8
		// trainable on each of 5,040 edges.
		{expr: `graph_transformer_processor(multiscale_edges(m), 2, 64, 4).params`, want: `150208`},
		{expr: `graph_transformer_processor(multiscale_edges(m), 2, 64, 4).kind`, want: `"graph_transformer_processor"`},
		{expr: `train(encoder_processor_decoder("t3", g, m, enc, proc, dec, 10, 5, data_variables = 12), members = 2, rollout = 3).rollout`, want: `3`},
		// The graph on the device: (2,568 + 3,000 + 5,040 edges) x 36 bytes
		// (3 fixed fp32 attributes, 2 int64 indices and, from anemoi-models
		// 0.16.0, the int64 permutation that sorted them by destination),
		// three edge_inc of 16 and (1,000 + 642) nodes x 16 bytes of
		// coordinates: 381,888 + 48 + 26,272.
		{expr: `simulate(train(encoder_processor_decoder("t2", g, m, enc, graph_transformer_processor(multiscale_edges(m), 2, 64, 4), dec, 10, 5, data_variables = 12), members = 2)).states["buffers"]`, want: `408208`},
		// The block, 13*64² + 28*64 = 55,040, and 8 trainable attributes on
		// each of 2,568 edges.
		{expr: `enc.params`, want: `75584`},
		// In the model: emb_nodes_src (22+1)*64 and emb_nodes_dst (12+1)*64 in
		// the encoder, emb_nodes_dst (22+1)*64 and the extractor 2*64 + 64*5 + 5
		// in the decoder, conditional norms in the processor (2 layers x 2 x
		// (2*(4*64 + 64) - 2*64) = 2,048 more), node attributes 8 x (1000 + 642) and
		// the noise MLP 300: 1,472 + 832 + 1,472 + 453 + 2,048 + 13,136 + 300.
		{expr: `model.params - (enc.params + proc.params + dec.params)`, want: `19713`},
	})
}

func TestGraphErrors(t *testing.T) {
	runPreludeCases(t, graphPrelude, []evalCase{
		{expr: `grid("z", 0)`, err: `grid "z": must have at least one point (got 0)`},
		{expr: `knn_edges("a", m, 1)`, err: `src must be a grid or a mesh (got string)`},
		{expr: `knn_edges(m, g, 643)`, err: `k=643 is more neighbours than mesh "m" has (642 nodes)`},
		{expr: `multiscale_edges(m, per_node = 0)`, err: `per_node must be positive (got 0)`},
		{expr: `stretched_mesh("s", 7, 10, 2)`, err: `regional_fraction must be in (0, 1)`},
		{expr: `icosahedral_mesh("o", 20)`, err: `refinement must be in [0, 15] (got 20)`},
		{expr: `graph_transformer(g, m, knn_edges(m, g, 1), 64, 4)`, err: `edges go from mesh "m" (642 nodes) to grid "g" (1000 nodes), not from grid "g" (1000 nodes) to mesh "m" (642 nodes)`},
		{expr: `graph_transformer(g, m, knn_edges(g, m, 1), 64, 5)`, err: `heads must divide channels (channels=64, heads=5)`},
		{expr: `graph_transformer(g, m, knn_edges(g, m, 1), 64, 4, eval_chunks = 0)`, err: `eval_chunks must be in [1, 642], the destination nodes it splits (got 0)`},
		{expr: `graph_transformer_processor(m, 2, 64, 4)`, err: `edges must be the mesh's edges, e.g. multiscale_edges(mesh) (got mesh)`},
		{expr: `graph_transformer_processor(knn_edges(g, m, 1), 2, 64, 4)`, err: `edges must connect a mesh's nodes to each other (got knn edges g -> m (642))`},
		{expr: `encoder_processor_decoder("x", g, m, enc, proc, dec, 10, 5, data_dates = 0, data_variables = 4)`, err: `data_dates and data_variables must be positive (got 0, 4)`},
		{expr: `transformer_processor(g, 2, 64, 4)`, err: `transformer_processor runs over a mesh (got grid "g" (1000 nodes))`},
		{expr: `transformer_processor(m, 3, 64, 4)`, err: `segments must divide layers (layers=3, segments=2)`},
		{expr: `encoder_processor_decoder("x", g, m, enc, enc, dec, 10, 5)`, err: `processor must be a transformer_processor or graph_transformer_processor (got graph_transformer)`},
		{expr: `encoder_processor_decoder("x", g, m, dec, proc, enc, 10, 5)`, err: `the encoder maps mesh "m" (642 nodes) onto grid "g" (1000 nodes)`},
		{expr: `encoder_processor_decoder("x", g, m, enc, proc, dec, 10, 5, loss = "l1")`, err: `unknown loss "l1" for encoder_processor_decoder (known: crps, mse)`},
		{expr: `simulate(train(model))`, err: `the crps loss compares ensemble members: it needs members >= 2 (got 1)`},
		{expr: `train(model, members = 2, rollout = 0)`, err: `rollout must be at least 1 (got 0)`},
		{expr: `train(model, members = 2, rollout = 2)`, err: `rollout=2 replays anemoi's rollout loop, which builds each step's input from the data batch, and model "tiny" has none`},
		{expr: `simulate(train(model, seq = 7, members = 2))`, err: `seq must be left unset for graph model "tiny"`},
	})
}

// A weather model reads no tokens: its throughput is samples per second,
// one input state (all its ensemble members) per sample (issue 24 item 5).
func TestGraphThroughputInSamples(t *testing.T) {
	runPreludeCases(t, graphPrelude+`
wx = encoder_processor_decoder("wx", g, m, enc, proc, dec, inputs = 10, outputs = 5, data_variables = 12)
r = simulate(train(wx, batch = 2, members = 3, gpu = "H100"))
d = simulate(train(wx, batch = 2, members = 3, gpu = "H100", parallel = parallel(dp = 4)))
s = simulate(train(wx, batch = 2, members = 3, members_mode = "spread", gpu = "H100", parallel = parallel(dp = 6)))
`, []evalCase{
		{expr: "r.tokens_per_s", want: "None"},
		{expr: "abs(r.samples_per_s * r.step_time - 2) < 1e-9", want: "True"},
		{expr: "abs(d.samples_per_s * d.step_time - 8) < 1e-9", want: "True"},
		// spread: 6 GPU groups, one member each, are 2 ensembles of 3 members
		// reading 2 input states each (anemoi's DDPEnsGroupStrategy shards the
		// data over the ensembles); counting every member on every group
		// reported 3 times as many
		{expr: "abs(s.samples_per_s * s.step_time - 4) < 1e-9", want: "True"},
		{expr: "[l.split(\"%, \")[-1] for l in str(r).splitlines() if l.startswith(\"  time\")][0].endswith(\" samples/s\")", want: "True"},
		{expr: "\"tokens/s\" in str(r)", want: "False"},
	})
}
