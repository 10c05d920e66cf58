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
