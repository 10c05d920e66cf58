package core

import "math"

// flowNet is a directed network with float capacities (+Inf allowed) for
// a minimum s-t cut, the way AOTAutograd's partitioner finds what a
// compiled graph saves (partitioner.go).
type flowNet struct {
	head []int32 // first edge of each node, -1 = none
	next []int32 // next edge from the same node
	to   []int32
	cap  []float64 // residual capacity; edge e^1 is e's reverse
}

func newFlowNet(nodes int) *flowNet {
	f := &flowNet{head: make([]int32, nodes)}
	for i := range f.head {
		f.head[i] = -1
	}
	return f
}

// edge adds u -> v with capacity c (and its zero-capacity reverse).
func (f *flowNet) edge(u, v int32, c float64) {
	for _, e := range [2]struct {
		a, b int32
		c    float64
	}{{u, v, c}, {v, u, 0}} {
		f.to = append(f.to, e.b)
		f.cap = append(f.cap, e.c)
		f.next = append(f.next, f.head[e.a])
		f.head[e.a] = int32(len(f.to) - 1)
	}
}

// minCut saturates the network from s to t (shortest augmenting paths,
// Edmonds-Karp) and returns the nodes still reachable from s in the
// residual network: the source side of the minimum cut closest to s, as
// networkx's minimum_cut reports it. ok is false when an augmenting path
// of infinite capacity exists (no finite cut).
func (f *flowNet) minCut(s, t int32) (source []bool, ok bool) {
	n := len(f.head)
	prev := make([]int32, n) // edge into each node on the BFS path
	queue := make([]int32, 0, n)
	for {
		for i := range prev {
			prev[i] = -1
		}
		queue = append(queue[:0], s)
		seen := make([]bool, n)
		seen[s] = true
		for q := 0; q < len(queue) && !seen[t]; q++ {
			u := queue[q]
			for e := f.head[u]; e >= 0; e = f.next[e] {
				if v := f.to[e]; !seen[v] && f.cap[e] > 0 {
					seen[v], prev[v] = true, e
					queue = append(queue, v)
				}
			}
		}
		if !seen[t] {
			return seen, true
		}
		push := math.Inf(1)
		for v := t; v != s; v = f.to[prev[v]^1] {
			push = min(push, f.cap[prev[v]])
		}
		if math.IsInf(push, 1) {
			return nil, false
		}
		for v := t; v != s; v = f.to[prev[v]^1] {
			f.cap[prev[v]] -= push
			f.cap[prev[v]^1] += push
		}
	}
}
