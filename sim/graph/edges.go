package graph

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/units"
)

// EdgeSet is a set of directed edges from Src nodes to Dst nodes. Count is
// exact unless Estimate is set; Rule says how it was obtained.
type EdgeSet struct {
	Kind     string // knn | radius | multiscale
	Src, Dst *NodeSet
	Count    int64
	PerDst   float64 // edges per destination node (k for knn)
	Estimate bool
	Rule     string
}

// KNNEdges connects each destination node to its k nearest source nodes:
// exactly k * dst edges (anemoi-graphs KNNEdges "uses as reference the
// target nodes", edges/builders/knn.py@graphs-0.6.3 l.26, 72).
func KNNEdges(src, dst *NodeSet, k int64) (*EdgeSet, error) {
	if err := checkEnds(src, dst); err != nil {
		return nil, err
	}
	if k <= 0 {
		return nil, &units.Error{Path: "knn_edges", Msg: fmt.Sprintf("k must be positive (got %d)", k)}
	}
	if k > src.Nodes {
		return nil, &units.Error{Path: "knn_edges", Msg: fmt.Sprintf("k=%d is more neighbours than %s %q has (%d nodes)", k, src.Kind, src.Name, src.Nodes),
			Hint: "each destination node takes its k nearest source nodes, so k can be at most the source nodes"}
	}
	if dst.Nodes > math.MaxInt64/k {
		return nil, units.Errorf("knn_edges", "edge count overflows (%d x %d)", k, dst.Nodes)
	}
	return &EdgeSet{Kind: "knn", Src: src, Dst: dst, Count: k * dst.Nodes, PerDst: float64(k),
		Rule: fmt.Sprintf("k=%d nearest %s nodes per %s node (anemoi-graphs KNNEdges)", k, src.Name, dst.Name)}, nil
}

// RadiusEdges connects each destination node to every source node within a
// radius (anemoi-graphs CutOffEdges). The count depends on the geometry;
// perNode is the expected neighbours per destination node, so the count
// is an estimate.
func RadiusEdges(src, dst *NodeSet, perNode float64) (*EdgeSet, error) {
	if err := checkEnds(src, dst); err != nil {
		return nil, err
	}
	if !(perNode > 0) || math.IsInf(perNode, 0) {
		return nil, &units.Error{Path: "radius_edges", Msg: fmt.Sprintf("per_node must be positive (got %g)", perNode),
			Hint: "the expected source nodes within the radius of a destination node; global anemoi setups see 15-20"}
	}
	if perNode > float64(src.Nodes) {
		return nil, &units.Error{Path: "radius_edges", Msg: fmt.Sprintf("per_node=%g is more neighbours than %s %q has (%d nodes)", perNode, src.Kind, src.Name, src.Nodes)}
	}
	n := math.Round(perNode * float64(dst.Nodes))
	if n >= math.MaxInt64 {
		return nil, units.Errorf("radius_edges", "edge count overflows")
	}
	return &EdgeSet{Kind: "radius", Src: src, Dst: dst, Count: int64(n), PerDst: perNode, Estimate: true,
		Rule: fmt.Sprintf("estimate: %g %s nodes within the radius per %s node (anemoi-graphs CutOffEdges)", perNode, src.Name, dst.Name)}, nil
}

// MultiscaleEdges are the processor edges of a refined icosahedral mesh
// (anemoi-graphs MultiScaleEdges, x_hops=1): every level i = 1..r adds the
// icosphere's 1-hop neighbours among its own vertices, 30*4^i undirected
// edges, both directions. On an icosahedral mesh with perNode = 0 the
// count is exact: sum over i of 60*4^i = 80*(4^r - 1), about 8 per node.
// Otherwise (stretched or explicit meshes, or perNode given) it is
// perNode * nodes, an estimate (anemoi.md section 3.3: about 8).
func MultiscaleEdges(mesh *NodeSet, perNode float64) (*EdgeSet, error) {
	if mesh == nil || mesh.Kind != "mesh" {
		what := "nothing"
		if mesh != nil {
			what = mesh.String()
		}
		return nil, &units.Error{Path: "multiscale_edges", Msg: "multiscale_edges connects the nodes of a mesh (got " + what + ")"}
	}
	if perNode == 0 && mesh.Refinement >= 0 {
		r := mesh.Refinement
		n := 80 * ((int64(1) << (2 * r)) - 1)
		return &EdgeSet{Kind: "multiscale", Src: mesh, Dst: mesh, Count: n, PerDst: float64(n) / float64(mesh.Nodes),
			Rule: fmt.Sprintf("sum over levels 1..%d of 60*4^i directed edges (anemoi-graphs MultiScaleEdges, x_hops=1)", r)}, nil
	}
	if perNode == 0 {
		perNode = 8
	}
	if !(perNode > 0) || math.IsInf(perNode, 0) || perNode > float64(mesh.Nodes) {
		return nil, &units.Error{Path: "multiscale_edges", Msg: fmt.Sprintf("per_node must be positive and at most the %d nodes of mesh %q (got %g)", mesh.Nodes, mesh.Name, perNode)}
	}
	return &EdgeSet{Kind: "multiscale", Src: mesh, Dst: mesh, Count: int64(math.Round(perNode * float64(mesh.Nodes))), PerDst: perNode, Estimate: true,
		Rule: fmt.Sprintf("estimate: %g directed edges per node (multi-scale icosahedral edges give about 8)", perNode)}, nil
}

func checkEnds(src, dst *NodeSet) error {
	if src == nil || dst == nil {
		return &units.Error{Msg: "edges need a source and a destination node set (grid or mesh)"}
	}
	return nil
}

func (e *EdgeSet) String() string {
	return fmt.Sprintf("%s edges %s -> %s (%d)", e.Kind, e.Src.Name, e.Dst.Name, e.Count)
}
