package search

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// stepBound reads the exposed time of a profile's tensor-parallel
// collectives in the group of the profile's plan (tpExposure): every
// layout of the profile has the same, bit for bit, on a space whose
// tensor parallelism stays inside a node and crosses nodes (tp 16 on
// nodes of 8), with pipelines, context parallelism, checkpointing and
// the shardings that recast (FSDP, ZeRO) or shard the optimizer.
func TestSearchTPBoundPerLayout(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 4, 16, 16, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	sp, err := Space{GPUs: 32, GlobalBatch: 64, TP: []int64{1, 2, 8, 16}, PP: []int64{1, 2}, CP: []int64{1, 2},
		Sharding: []string{"ddp", "zero1", "zero3", "fsdp"}, Checkpoint: []string{"none", "full"}, Workers: 1}.defaults(base)
	if err != nil {
		t.Fatal(err)
	}
	layouts, _, err := sp.enumerate(base)
	if err != nil {
		t.Fatal(err)
	}
	profiles := map[profileKey]*profile{}
	var checked, exposed int
	for _, l := range layouts {
		p := sp.planOf(base, l)
		if p.ValidateFor(base.Model) != nil {
			continue
		}
		k := sp.keyOf(&p, l)
		pr, ok := profiles[k]
		if !ok {
			if pr, err = newProfile(sp.plan(base, l), flatUnits|stageUnits); err != nil {
				t.Fatal(err)
			}
			profiles[k] = pr
		}
		q := &p
		if d, ok := q.DeepspeedPrecision(); ok { // as newProfileIn and stepBound read it
			q = d
		}
		own := *pr
		own.plan = q
		if got := own.tpExposure(); got != pr.tp {
			t.Fatalf("%s: tensor-parallel collectives expose %+v in the layout's group, %+v in its profile's", rowName(q, sp.Sharding[l.sharding]), got, pr.tp)
		}
		checked++
		if pr.tp.ok && (pr.tp.block.fwd > 0 || pr.tp.chunks[middleChunk].block.fwd > 0) {
			exposed++
		}
	}
	if checked < 100 || exposed == 0 || exposed == checked {
		t.Fatalf("%d layouts checked, %d with exposed tensor-parallel collectives: the space no longer tells the groups apart", checked, exposed)
	}
	t.Logf("%d layouts of %d profiles, %d with exposed tensor-parallel collectives", checked, len(profiles), exposed)
}
