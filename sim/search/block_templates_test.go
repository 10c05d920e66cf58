package search

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// spaceProfiles are a plan of each profile of space sp over base, and
// the units its layouts read (as Run numbers them).
func spaceProfiles(t *testing.T, base *core.Plan, sp Space) ([]*core.Plan, []profileParts) {
	t.Helper()
	sp, err := sp.defaults(base)
	if err != nil {
		t.Fatal(err)
	}
	layouts, _, err := sp.enumerate(base)
	if err != nil {
		t.Fatal(err)
	}
	valid, _, err := sp.checkAll(context.Background(), base, layouts, nil)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := sp.number(context.Background(), base, layouts, valid)
	if err != nil {
		t.Fatal(err)
	}
	return nb.firstOf, nb.partsOf
}

// lowerProfilesBoth lowers each profile (plans[i], parts[i]) as Run's
// workers do, one after another into one lowering with block templates
// and into one without, and fails where any program differs. It
// returns the blocks copied from templates and the profiles' programs.
func lowerProfilesBoth(t *testing.T, plans []*core.Plan, parts []profileParts) (copies, programs int) {
	t.Helper()
	with, without := newLowering(nil), newLowering(nil)
	for i := range without.bufs {
		without.bufs[i].Templates = nil
	}
	for i, p := range plans {
		_, errW := newProfileIn(p, parts[i], with)
		_, errN := newProfileIn(p, parts[i], without)
		if fmt.Sprint(errW) != fmt.Sprint(errN) {
			t.Fatalf("profile %d (%s): %v with templates, %v without", i, p.Parallel, errW, errN)
		}
		for slot, prog := range with.progs {
			if prog == nil {
				continue
			}
			programs++
			if msg := programDiff(prog, without.progs[slot]); msg != "" {
				t.Fatalf("profile %d (%s), program %d: %s", i, p.Parallel, slot, msg)
			}
		}
		with.release()
		without.release()
	}
	return with.blocks.Copies(), programs
}

// programDiff says where a and b first differ ("" when they are equal).
func programDiff(a, b *core.Program) string {
	if b == nil {
		return "lowered with templates only"
	}
	if reflect.DeepEqual(a, b) { // one walk of both; the rest says where they differ
		return ""
	}
	if len(a.Ops) != len(b.Ops) {
		return fmt.Sprintf("%d ops, %d from scratch", len(a.Ops), len(b.Ops))
	}
	for i := range a.Ops {
		if !reflect.DeepEqual(a.Ops[i], b.Ops[i]) {
			return fmt.Sprintf("op %d: %+v, from scratch %+v", i, a.Ops[i], b.Ops[i])
		}
	}
	for i := range min(len(a.Values), len(b.Values)) {
		if !reflect.DeepEqual(a.Values[i], b.Values[i]) {
			return fmt.Sprintf("value %d: %+v, from scratch %+v", i, a.Values[i], b.Values[i])
		}
	}
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return fmt.Sprintf("%s: %+v, from scratch %+v", va.Type().Field(i).Name, va.Field(i), vb.Field(i))
		}
	}
	return ""
}

// Every profile of the 70B search's space, of a small MoE's and of the
// fast path's plans (sharding modes, schedules, checkpoint policies, tp,
// cp and ep, offload, MoE and mixed blocks) lowers the same programs,
// entry by entry, with block templates (core.BlockTemplates: a block
// copied from another program of its profile) as from scratch.
func TestBlockTemplatesLowerAsFromScratch(t *testing.T) {
	if testing.Short() {
		t.Skip("lowers every profile of the 70B search twice")
	}
	base := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	plans, parts := spaceProfiles(t, base, Space{GPUs: 1024, GlobalBatch: 1024, Workers: 1})
	copies, programs := lowerProfilesBoth(t, plans, parts)
	t.Logf("70B: %d profiles, %d programs, %d blocks copied from templates", len(plans), programs, copies)

	moe := testmodels.LlamaPlan(smallMoE(), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	plans, parts = spaceProfiles(t, moe, Space{GPUs: 8, GlobalBatch: 16, Workers: 1})
	copies, programs = lowerProfilesBoth(t, plans, parts)
	t.Logf("MoE: %d profiles, %d programs, %d blocks copied from templates", len(plans), programs, copies)

	plans, parts = fastPathPlans(), nil
	for range plans {
		parts = append(parts, flatUnits|stageUnits)
	}
	copies, programs = lowerProfilesBoth(t, plans, parts)
	t.Logf("fast path: %d plans, %d programs, %d blocks copied from templates", len(plans), programs, copies)
}
