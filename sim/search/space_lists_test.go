package search

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// TestSpaceListsRepeat: a list of the space that names a value twice is
// refused, naming the list and the value (search(tp=[2, 2]) listed each
// layout twice, one row on the front and one not); the same lists
// without the repeat are taken.
func TestSpaceListsRepeat(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	for _, row := range []struct {
		name string
		set  func(sp *Space, repeat bool)
		want string
	}{
		{"tp", func(sp *Space, r bool) { sp.TP = pick(r, []int64{2, 2}, []int64{2, 4}) }, "tp lists 2 twice"},
		{"pp", func(sp *Space, r bool) { sp.PP = pick(r, []int64{1, 2, 1}, []int64{1, 2}) }, "pp lists 1 twice"},
		{"cp", func(sp *Space, r bool) { sp.CP = pick(r, []int64{4, 4}, []int64{4}) }, "cp lists 4 twice"},
		{"ep", func(sp *Space, r bool) { sp.EP = pick(r, []int64{1, 1}, []int64{1}) }, "ep lists 1 twice"},
		{"micro_batch", func(sp *Space, r bool) { sp.MicroBatch = pick(r, []int64{1, 2, 2}, []int64{1, 2}) }, "micro_batch lists 2 twice"},
		{"virtual_stages", func(sp *Space, r bool) { sp.Virtual = pick(r, []int64{2, 2}, []int64{2}) }, "virtual_stages lists 2 twice"},
		{"sharding", func(sp *Space, r bool) {
			sp.Sharding = pick(r, []string{"fsdp", "ddp", "fsdp"}, []string{"fsdp", "ddp"})
		}, `sharding lists "fsdp" twice`},
		{"cp_mode", func(sp *Space, r bool) { sp.CPModes = pick(r, []string{"ring", "ring"}, []string{"ring"}) }, `cp_mode lists "ring" twice`},
		{"checkpoint", func(sp *Space, r bool) { sp.Checkpoint = pick(r, []string{"full", "full"}, []string{"full"}) }, `checkpoint lists "full" twice`},
		{"offload", func(sp *Space, r bool) { sp.Offload = pick(r, []string{"none", "none"}, []string{"none"}) }, `offload lists "none" twice`},
	} {
		for _, repeat := range []bool{true, false} {
			sp := Space{GPUs: 8, GlobalBatch: 16}
			row.set(&sp, repeat)
			_, err := sp.defaults(base)
			switch {
			case repeat && (err == nil || !strings.Contains(err.Error(), row.want)):
				t.Errorf("%s repeated: %v, want %q", row.name, err, row.want)
			case !repeat && err != nil:
				t.Errorf("%s once: %v", row.name, err)
			}
		}
	}
}

func pick[T any](repeat bool, with, without []T) []T {
	if repeat {
		return with
	}
	return without
}

// TestSpaceEP: an expert-parallel degree above 1 is refused for a model
// without experts, and one that does not divide a MoE's experts (every
// such layout was rejected by the plan, and the search ended with no row
// and "more GPUs may help"); ep=[1] is taken, and a MoE of 8 experts
// takes ep=[1, 2].
func TestSpaceEP(t *testing.T) {
	dense := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	moe := testmodels.LlamaPlan(smallMoE(), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	for _, row := range []struct {
		name string
		base bool // the dense model
		ep   []int64
		want string
	}{
		{"dense ep 2", true, []int64{2}, "ep=[2]: model " + dense.Model.Name + " has no experts to spread"},
		{"dense ep 1, 2", true, []int64{1, 2}, "ep=[1 2]: model " + dense.Model.Name + " has no experts to spread"},
		{"dense ep 1", true, []int64{1}, ""},
		{"dense default", true, nil, ""},
		{"moe ep 1, 2", false, []int64{1, 2}, ""},
		{"moe ep 3 of 8 experts", false, []int64{1, 3}, "ep=3 does not divide the 8 experts of a layer of model moe"},
		{"moe ep 16 of 8 experts", false, []int64{16}, "ep=16 does not divide the 8 experts"},
	} {
		p := moe
		if row.base {
			p = dense
		}
		_, err := Space{GPUs: 8, GlobalBatch: 16, EP: row.ep}.defaults(p)
		if row.want == "" && err != nil || row.want != "" && (err == nil || !strings.Contains(err.Error(), row.want)) {
			t.Errorf("%s: %v, want %q", row.name, err, row.want)
		}
	}
}

// TestSpaceIdleLists: a virtual_stages list past 1 where every pp is 1,
// or a cp_mode list where every cp is 1, is refused with what would read
// it (the search ignored the list); the same lists beside a degree that
// reads them are taken.
func TestSpaceIdleLists(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	for _, row := range []struct {
		sp   Space
		want string // "" when taken
	}{
		{Space{PP: []int64{1}, Virtual: []int64{2}}, "virtual_stages=[2]: model chunks per GPU need pipeline stages, and pp=[1]"},
		{Space{PP: []int64{1}, Virtual: []int64{1}}, ""},
		{Space{PP: []int64{1, 2}, Virtual: []int64{2}}, ""},
		{Space{Virtual: []int64{2}}, ""}, // pp's default lists more than 1
		{Space{CP: []int64{1}, CPModes: []string{"ulysses"}}, `cp_mode=["ulysses"]: context parallelism's attention needs cp above 1, and cp=[1]`},
		{Space{CP: []int64{1, 2}, CPModes: []string{"ulysses"}}, ""},
		{Space{CPModes: []string{"ring"}}, ""},
	} {
		sp := row.sp
		sp.GPUs, sp.GlobalBatch = 8, 16
		_, err := sp.defaults(base)
		switch {
		case row.want == "" && err != nil:
			t.Errorf("%+v: %v, want it taken", row.sp, err)
		case row.want != "" && (err == nil || !strings.Contains(err.Error(), row.want)):
			t.Errorf("%+v: %v, want %q", row.sp, err, row.want)
		}
	}
}
