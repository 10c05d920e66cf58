package search

import (
	"slices"
	"sync"

	"github.com/memsh/memsh/sim/core"
)

// A pipeline split of n blocks (core.Parallelism.ChunkLayers) and the
// distinct stages it makes are a function of n and the split's
// settings alone, not of the profile: the shapes of every profile with
// the same split share them (splitTable), rather than each shape
// working them out again (in BenchmarkSearchLlama70B1024, thousands of
// shapes over a few dozen splits).

// splitKey is what ChunkLayers reads (core.ChunkSplit) with the block
// count: two shapes with the same key have the same split.
type splitKey struct {
	n     int64
	split core.ChunkSplit
}

// chunkSplit is a pipeline split's blocks per chunk and its distinct
// stages (stageShape's kindOf and chunks), shared read-only by the
// shapes of that split.
type chunkSplit struct {
	layers []int64      // blocks of each model chunk, in chunk order
	kindOf []int        // stage s's distinct stage
	chunks [][]chunkKey // each distinct stage's chunks
	err    error
}

// splitTable holds the splits of one run, for shapes made on any
// worker. A nil table keeps nothing (each call works its split out).
type splitTable struct {
	mu sync.Mutex
	m  map[splitKey]*chunkSplit
}

// of is the split of n blocks by par (normalized).
func (t *splitTable) of(par core.Parallelism, n int64) *chunkSplit {
	if t == nil || len(par.StageLayers) > 0 { // a list of counts is no key; the search's layouts never set one (planOf)
		return newChunkSplit(par, n)
	}
	k := splitKey{n: n, split: par.Split()}
	t.mu.Lock()
	defer t.mu.Unlock()
	cs, ok := t.m[k]
	if !ok {
		if t.m == nil {
			t.m = map[splitKey]*chunkSplit{}
		}
		cs = newChunkSplit(par, n)
		t.m[k] = cs
	}
	return cs
}

// newChunkSplit works out the split of n blocks by par (normalized).
// Stages alike are one distinct stage, numbered in the order they first
// appear. A stage's chunk keys say all that made them alike (whether it
// is the first stage: its first chunk's kind; the last: its last
// chunk's; each chunk's blocks), and a split has few distinct stages
// (blocks per chunk take two values), so a stage is compared with each
// distinct one (a map keyed on a formatted key made three allocations
// per shape and distinct stage: a fifth of BenchmarkSearchLlama70B1024's).
func newChunkSplit(par core.Parallelism, n int64) *chunkSplit {
	layers, err := par.ChunkLayers(n, "search")
	if err != nil {
		return &chunkSplit{err: err}
	}
	cs := &chunkSplit{layers: layers, kindOf: make([]int, 0, par.PP)}
	last := par.PP*par.VirtualStages - 1
	var room [8]chunkKey
	cks := room[:0]
	for s := int64(0); s < par.PP; s++ {
		cks = cks[:0]
		for c := int64(0); c < par.VirtualStages; c++ {
			g := c*par.PP + s
			cks = append(cks, chunkKey{chunkKind(g, last), layers[g]})
		}
		k := slices.IndexFunc(cs.chunks, func(d []chunkKey) bool { return slices.Equal(d, cks) })
		if k < 0 {
			k = len(cs.chunks)
			cs.chunks = append(cs.chunks, slices.Clone(cks))
		}
		cs.kindOf = append(cs.kindOf, k)
	}
	return cs
}
