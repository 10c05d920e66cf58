package graph

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/units"
)

// NodeSet is a set of graph nodes: a grid of data points ("grid") or a
// hidden mesh ("mesh"). Its count is exact unless Estimate is set, in
// which case Rule says how it was estimated.
type NodeSet struct {
	Kind       string // grid | mesh
	Name       string
	Nodes      int64
	Estimate   bool
	Rule       string
	Regional   int64 // stretched grids and meshes: nodes of the regional (high-resolution) part
	Global     int64 // stretched grids and meshes: nodes of the global (coarse) part
	Refinement int   // icosahedral meshes: refinement level; -1 otherwise
}

// maxRefinement bounds icosahedral refinement levels: 10*4^15+2 is 1.07e10
// nodes, far past any mesh that fits a GPU.
const maxRefinement = 15

// Grid is any set of data points.
func Grid(name string, points int64) (*NodeSet, error) {
	if points <= 0 {
		return nil, &units.Error{Path: fmt.Sprintf("grid %q", name), Msg: fmt.Sprintf("must have at least one point (got %d)", points)}
	}
	return &NodeSet{Kind: "grid", Name: name, Nodes: points, Refinement: -1, Rule: "given"}, nil
}

// StretchedGrid is a regional high-resolution grid inside a coarser global
// one (anemoi's stretched grids: a limited-area cutout plus the global
// points outside it). The count is the sum.
func StretchedGrid(name string, regional, global int64) (*NodeSet, error) {
	if regional <= 0 || global <= 0 {
		return nil, &units.Error{Path: fmt.Sprintf("stretched grid %q", name), Msg: fmt.Sprintf("needs regional and global points, both positive (got %d and %d)", regional, global),
			Hint: "use grid(name, points) for a grid with one resolution"}
	}
	if regional > math.MaxInt64-global {
		return nil, units.Errorf(fmt.Sprintf("stretched grid %q", name), "point count overflows")
	}
	return &NodeSet{Kind: "grid", Name: name, Nodes: regional + global, Regional: regional, Global: global,
		Refinement: -1, Rule: "regional + global points"}, nil
}

// icosahedralNodes is the vertex count of an icosphere subdivided r times:
// 10*4^r + 2 (trimesh.creation.icosphere, which anemoi-graphs' TriNodes
// uses: graphs/.../tri_icosahedron.py@graphs-0.6.3 l.120).
func icosahedralNodes(r int) int64 { return 10*(int64(1)<<(2*r)) + 2 }

func checkRefinement(name, what string, r int) error {
	if r < 0 || r > maxRefinement {
		return &units.Error{Path: fmt.Sprintf("mesh %q", name), Msg: fmt.Sprintf("%s must be in [0, %d] (got %d)", what, maxRefinement, r),
			Hint: "refinement 6 has 40,962 nodes (~112 km apart), 7 has 163,842 (~56 km)"}
	}
	return nil
}

// IcosahedralMesh is the vertex set of an icosphere refined r times: exactly
// 10*4^r + 2 nodes.
func IcosahedralMesh(name string, r int) (*NodeSet, error) {
	if err := checkRefinement(name, "refinement", r); err != nil {
		return nil, err
	}
	return &NodeSet{Kind: "mesh", Name: name, Nodes: icosahedralNodes(r), Refinement: r,
		Rule: fmt.Sprintf("10*4^%d + 2 icosphere vertices", r)}, nil
}

// StretchedMesh estimates the nodes of anemoi-graphs' StretchedTriNodes
// (create_stretched_tri_nodes, tri_icosahedron.py@graphs-0.6.3 l.60-101):
// the icosphere at the regional refinement is kept inside the area of
// interest and the one at the global refinement outside it. With the area
// of interest a fraction f of the sphere, the count is about
//
//	(10*4^g + 2) * (1 - f) + (10*4^r + 2) * f
//
// (anemoi.md section 3.2). It is an estimate: the icosphere is not
// equal-area, so the share of vertices inside the area differs from f by a
// few per cent (Bris: 261,634 nodes, an f of 0.00947 for g=7, r=10).
func StretchedMesh(name string, global, regional int, fraction float64) (*NodeSet, error) {
	if err := checkRefinement(name, "global_refinement", global); err != nil {
		return nil, err
	}
	if err := checkRefinement(name, "regional_refinement", regional); err != nil {
		return nil, err
	}
	if regional <= global {
		return nil, &units.Error{Path: fmt.Sprintf("mesh %q", name), Msg: fmt.Sprintf("regional_refinement must be finer than global_refinement (got %d and %d)", regional, global)}
	}
	if !(fraction > 0 && fraction < 1) {
		return nil, &units.Error{Path: fmt.Sprintf("mesh %q", name), Msg: fmt.Sprintf("regional_fraction must be in (0, 1), the share of the sphere refined (got %g)", fraction),
			Hint: "a 5 million km² region is 0.0098 of the sphere"}
	}
	g, r := float64(icosahedralNodes(global)), float64(icosahedralNodes(regional))
	in := int64(math.Round(r * fraction))
	out := int64(math.Round(g * (1 - fraction)))
	return &NodeSet{Kind: "mesh", Name: name, Nodes: in + out, Regional: in, Global: out, Refinement: -1, Estimate: true,
		Rule: fmt.Sprintf("estimate: (10*4^%d+2)*(1-f) + (10*4^%d+2)*f with f=%g (anemoi-graphs StretchedTriNodes)", global, regional, fraction)}, nil
}

// Mesh is a hidden mesh with an explicit node count.
func Mesh(name string, nodes int64) (*NodeSet, error) {
	if nodes <= 0 {
		return nil, &units.Error{Path: fmt.Sprintf("mesh %q", name), Msg: fmt.Sprintf("must have at least one node (got %d)", nodes)}
	}
	return &NodeSet{Kind: "mesh", Name: name, Nodes: nodes, Refinement: -1, Rule: "given"}, nil
}

// sameNodes reports whether a and b are the same node set.
func sameNodes(a, b *NodeSet) bool {
	return a == b || (a != nil && b != nil && a.Kind == b.Kind && a.Name == b.Name && a.Nodes == b.Nodes)
}

func (n *NodeSet) String() string { return fmt.Sprintf("%s %q (%d nodes)", n.Kind, n.Name, n.Nodes) }
