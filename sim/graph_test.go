package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
)

func TestIcosahedralMeshNodes(t *testing.T) {
	for _, c := range []struct {
		r    int
		want int64
	}{{0, 12}, {1, 42}, {2, 162}, {5, 10_242}, {6, 40_962}, {7, 163_842}, {10, 10_485_762}} {
		m, err := graph.IcosahedralMesh("m", c.r)
		if err != nil {
			t.Fatal(err)
		}
		if m.Nodes != c.want || m.Estimate {
			t.Errorf("r=%d: %d nodes (estimate %v), want exactly %d", c.r, m.Nodes, m.Estimate, c.want)
		}
	}
}

func TestStretchedCounts(t *testing.T) {
	// round(10,485,762 x 0.00947) = 99,300 inside, round(163,842 x 0.99053)
	// = 162,290 outside: 261,590, within 0.02 % of Bris's 261,634.
	m, err := graph.StretchedMesh("hidden", 7, 10, 0.00947)
	if err != nil {
		t.Fatal(err)
	}
	if m.Nodes != 261_590 || m.Regional != 99_300 || m.Global != 162_290 || !m.Estimate {
		t.Errorf("stretched mesh: %+v", m)
	}
	g, err := graph.StretchedGrid("bris", 822_700, 536_581)
	if err != nil {
		t.Fatal(err)
	}
	if g.Nodes != 1_359_281 {
		t.Errorf("stretched grid: %d points", g.Nodes)
	}
}

func TestEdgeCounts(t *testing.T) {
	grid, _ := graph.Grid("bris", 1_359_281)
	mesh, _ := graph.Mesh("hidden", 261_634)
	ico, _ := graph.IcosahedralMesh("o6", 6)
	knnEnc, _ := graph.KNNEdges(grid, mesh, 12)
	knnDec, _ := graph.KNNEdges(mesh, grid, 3)
	radius, _ := graph.RadiusEdges(grid, mesh, 15.5)
	multi, _ := graph.MultiscaleEdges(ico, 0)
	multiEst, _ := graph.MultiscaleEdges(mesh, 0)
	for _, c := range []struct {
		name     string
		e        *graph.EdgeSet
		want     int64
		estimate bool
	}{
		{"encoder knn 12 per hidden node", knnEnc, 3_139_608, false},
		{"decoder knn 3 per grid point", knnDec, 4_077_843, false},
		{"radius 15.5 per node", radius, 4_055_327, true},              // round(15.5 x 261,634)
		{"multiscale on refinement 6", multi, 327_600, false},          // 80 x (4^6 - 1)
		{"multiscale estimate, 8 per node", multiEst, 2_093_072, true}, // 8 x 261,634
	} {
		if c.e.Count != c.want || c.e.Estimate != c.estimate {
			t.Errorf("%s: %d edges (estimate %v), want %d (%v)", c.name, c.e.Count, c.e.Estimate, c.want, c.estimate)
		}
	}
}

func TestGraphErrors(t *testing.T) {
	grid, _ := graph.Grid("g", 100)
	mesh, _ := graph.Mesh("m", 10)
	check := func(name string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, want)
		}
	}
	_, err := graph.Grid("g", 0)
	check("zero points", err, `grid "g": must have at least one point (got 0)`)
	_, err = graph.Mesh("m", -3)
	check("negative nodes", err, `mesh "m": must have at least one node (got -3)`)
	_, err = graph.StretchedGrid("s", 0, 10)
	check("stretched grid without regional points", err, "both positive (got 0 and 10)")
	_, err = graph.KNNEdges(mesh, grid, 11)
	check("k above source nodes", err, `knn_edges: k=11 is more neighbours than mesh "m" has (10 nodes)`)
	_, err = graph.KNNEdges(grid, mesh, 0)
	check("k zero", err, "k must be positive (got 0)")
	_, err = graph.RadiusEdges(grid, mesh, 0)
	check("radius per_node zero", err, "per_node must be positive (got 0)")
	_, err = graph.IcosahedralMesh("o", 16)
	check("refinement too fine", err, `mesh "o": refinement must be in [0, 15] (got 16)`)
	_, err = graph.StretchedMesh("s", 7, 7, 0.1)
	check("regional not finer", err, "regional_refinement must be finer than global_refinement (got 7 and 7)")
	_, err = graph.StretchedMesh("s", 7, 10, 1)
	check("fraction 1", err, "regional_fraction must be in (0, 1)")
	_, err = graph.MultiscaleEdges(grid, 0)
	check("multiscale on a grid", err, `multiscale_edges connects the nodes of a mesh (got grid "g" (100 nodes))`)
}

func TestChunkEdges(t *testing.T) {
	for _, c := range []struct {
		e, r, k int64
		want    []int64
	}{
		{12, 4, 3, []int64{6, 3, 3}}, // 3 per row, rows split 2, 1, 1
		{10, 4, 3, []int64{5, 2, 3}}, // in proportion: floor(10*2/4), floor(10*3/4) - 5, the rest
		{8_155_686, 2_718_562, 4, []int64{2_038_923, 2_038_923, 2_038_920, 2_038_920}},
	} {
		got := graph.ChunkEdges(c.e, c.r, c.k)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("chunkEdges(%d, %d, %d) = %v, want %v", c.e, c.r, c.k, got, c.want)
				break
			}
		}
	}
}

func TestGraphOverflow(t *testing.T) {
	p := bris(t, 2, "stacked", 16, 1, "train")
	p.Batch = 1 << 40
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "too large to count in bytes") {
		t.Errorf("huge batch: %v", err)
	}
}
