package core

import (
	"reflect"
	"testing"
)

// chunkLayersIn gives ChunkLayers' counts and errors whether it writes
// into a caller's room (large enough, too small, holding old counts) or
// a list of its own.
func TestChunkLayersIn(t *testing.T) {
	for _, par := range []Parallelism{
		{PP: 4}, {PP: 3}, {PP: 2, VirtualStages: 2, Schedule: "interleaved"}, {PP: 4, StageSplit: "torchtitan"},
		{PP: 4, EmbeddingSlot: true, LossSlot: true}, {PP: 4, FirstStageLayers: 2, LastStageLayers: 4},
		{PP: 2, StageLayers: []int64{3, 7}}, {PP: 2, StageLayers: []int64{3}}, {PP: 8, VirtualStages: 2, Schedule: "interleaved"},
	} {
		want, wantErr := par.ChunkLayers(10, "m")
		for _, room := range [][]int64{nil, make([]int64, 0, 1), {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}} {
			got, err := par.chunkLayersIn(room[:0:cap(room)], 10, "m")
			if !reflect.DeepEqual(err, wantErr) || (err == nil && !reflect.DeepEqual(got, want)) {
				t.Errorf("%+v in room %d: %v, %v; want %v, %v", par, cap(room), got, err, want, wantErr)
			}
		}
	}
}
