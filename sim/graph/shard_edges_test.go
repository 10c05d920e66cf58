package graph

import "testing"

// TestHaloNodes: the halo estimate of rank 0 (shard_edges.go), 2 x M x d
// / 2 = M x d per boundary with d = sqrt(8π / (√3 M)), so M x d =
// sqrt(8π M / √3), capped by the other ranks' nodes.
func TestHaloNodes(t *testing.T) {
	for _, c := range []struct {
		nodes, g, want int64
	}{
		{40_962, 1, 0},     // one GPU: no halo
		{40_962, 2, 771},   // sqrt(8π x 40,962 / √3) = sqrt(594,366) = 770.95: TriNodes(6), one boundary
		{40_962, 4, 1_542}, // an inner rank's two boundaries: 2 x 770.95 = 1,541.9
		{100, 2, 39},       // sqrt(1,451.1) = 38.09
		{10, 2, 5},         // sqrt(145.1) = 12.05, more than the other GPU's 5 nodes
	} {
		if got := haloNodes(c.nodes, c.g); got != c.want {
			t.Errorf("haloNodes(%d, %d) = %d, want %d", c.nodes, c.g, got, c.want)
		}
	}
}

// TestBandSources: the source rows a band of destination rows reads
// (GraphTransformer.bandSources), on the nightly benchmark's graphs: the
// n320 grid's 542,080 points and TriNodes(6)'s 40,962 nodes.
func TestBandSources(t *testing.T) {
	grid, _ := Grid("n320", 542_080)
	mesh, _ := IcosahedralMesh("hidden", 6)
	enc, _ := RadiusEdges(grid, mesh, 852_830.0/40_962) // 20.82 grid points per mesh node
	dec, _ := KNNEdges(mesh, grid, 3)
	sgrid, _ := StretchedGrid("lam", 1_000, 2_000)
	lam, _ := KNNEdges(mesh, sgrid, 3)
	for _, c := range []struct {
		name        string
		edges       *EdgeSet
		start, r, e int64
		want        int64
	}{
		// GPU 0 of 2: half the mesh, one boundary: 542,080 / 2 + sqrt(20.82 x 542,080) = 271,040 + 3,359.5.
		{"encoder, GPU 0 of 2", enc, 0, 20_481, 426_415, 274_400},
		// The whole mesh: no boundary, every grid point.
		{"encoder, one GPU", enc, 0, 40_962, 852_830, 542_080},
		// GPU 0's second chunk of 2: a quarter of the grid, two boundaries: 10,240.5 + 2 x 350.55, capped at its edges.
		{"decoder, chunk 1 of GPU 0", dec, 135_520, 135_520, 406_560, 10_942},
		// A stretched grid is not uniform: min(sources, edges).
		{"stretched", lam, 0, 1_500, 4_500, 4_500},
	} {
		g := &GraphTransformer{Edges: c.edges}
		sAll, dAll := c.edges.Src.Nodes, c.edges.Dst.Nodes
		if got := g.bandSources(sAll, dAll, c.start, c.r, c.e); got != c.want {
			t.Errorf("%s: %d source rows, want %d", c.name, got, c.want)
		}
	}
}
