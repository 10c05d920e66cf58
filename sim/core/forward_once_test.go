package core

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// OutsideRegions moves the op appended last ahead of the outermost open
// region, out of a nested one too, shifting the ops it passes with their
// values' producers and the regions' bounds; with no region open it
// moves nothing.
func TestOutsideRegions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		regions bool
		order   []string // the ops' names once tables is made
		region  []int32  // each op's region
		bounds  [][2]int32
	}{
		{"checkpointed", true, []string{"embed", "tables", "norm", "attn", "inner"}, []int32{0, 0, 1, 1, 2}, [][2]int32{{2, 6}, {4, 5}}},
		{"no region", false, []string{"embed", "norm", "attn", "inner", "tables"}, []int32{0, 0, 0, 0, 0}, nil},
	} {
		b := &Builder{P: &Program{}}
		add := func(name string, in ...Value) Value {
			i := b.AddOp("op", name, in)
			return b.Out(i, name, []int64{2, 4}, units.FP32, name)
		}
		x := add("embed")
		end := func() {}
		if tc.regions {
			end = b.BeginRegion("layers.0")
		}
		h := add("norm", x)
		h = add("attn", h)
		if tc.regions {
			inner := b.BeginNestedRegion("layers.0.mlp")
			h = add("inner", h)
			inner()
		} else {
			h = add("inner", h)
		}
		i := b.AddOp("rope_tables", "tables", nil)
		tables := b.Out(i, "tables", []int64{1, 4}, units.FP32, "tables")
		b.OutsideRegions(i)
		add("after", h, tables) // still in the open region
		end()
		var names []string
		var regions []int32
		for _, op := range b.P.Ops[:5] {
			names = append(names, op.Name)
			regions = append(regions, op.Region)
		}
		if !slices.Equal(names, tc.order) || !slices.Equal(regions, tc.region) {
			t.Errorf("%s: ops %v in regions %v, want %v in %v", tc.name, names, regions, tc.order, tc.region)
		}
		for j, op := range b.P.Ops {
			for _, v := range op.Out {
				if p := b.P.Values[v].Producer; p != int32(j) {
					t.Errorf("%s: %s made by op %d, which is %s", tc.name, b.P.Values[v].Name, p, op.Name)
				}
			}
		}
		for k, want := range tc.bounds {
			if r := b.P.Regions[k]; r.First != want[0] || r.End != want[1] {
				t.Errorf("%s: region %d ops [%d, %d), want [%d, %d)", tc.name, k+1, r.First, r.End, want[0], want[1])
			}
		}
	}
}
