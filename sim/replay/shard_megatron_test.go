package replay

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestMegatronShards counts rank 0's main-parameter shards by hand: the
// buffer holds the parameters in reverse order, rank 0 the first S
// elements, a grouped expert tensor one tensor per expert.
func TestMegatronShards(t *testing.T) {
	p := &core.Program{Params: []core.ParamInfo{
		{Name: "a", Shape: []int64{10}, Numel: 10},
		{Name: "experts.fc1", Shape: []int64{4, 2, 3}, Numel: 24, Role: core.Role("expert_up")},
		{Name: "c", Shape: []int64{2, 3}, Numel: 6},
	}}
	g := paramGroup{name: "dense", params: []int32{0, 1, 2}, numel: 40}
	for _, tc := range []struct {
		shard int64
		want  []mainShard
	}{
		// buffer order: c (6), expert 3, 2, 1, 0 (6 each), a (10)
		{shard: 10, want: []mainShard{{1, 4}, {2, 6}}},                 // dp 4: c, 4 of the last expert
		{shard: 20, want: []mainShard{{1, 2}, {1, 6}, {1, 6}, {2, 6}}}, // dp 2
		{shard: 40, want: []mainShard{{0, 10}, {1, 6}, {1, 6}, {1, 6}, {1, 6}, {2, 6}}},
	} {
		got := megatronShards(p, g, tc.shard)
		if !slices.Equal(got, tc.want) {
			t.Errorf("shard %d: %v, want %v", tc.shard, got, tc.want)
		}
		var sum int64
		for _, s := range got {
			sum += s.n
		}
		if sum != tc.shard {
			t.Errorf("shard %d: the shards hold %d elements", tc.shard, sum)
		}
	}
}
