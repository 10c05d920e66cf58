package core

import (
	"reflect"
	"testing"
)

// sameLayout agrees with reflect.DeepEqual where any one field of a
// layout differs, holds an equal list from elsewhere or is cleared,
// starting from a layout with its lists set and from the zero one: a
// field added to Parallelism that it does not compare fails here (a
// LayoutMemo would then hand one layout's verdict to another).
func TestSameLayoutComparesEveryField(t *testing.T) {
	typ := reflect.TypeOf(Parallelism{})
	var paths [][]int
	leaves(typ, nil, &paths)
	checks := 0
	for _, start := range []Parallelism{{}, {DP: 8, TP: 2, PP: 2, StageLayers: []int64{10, 10}, FSDPUnits: []string{"embed"}, ExpertLoad: 1.5}} {
		a := start
		if !sameLayout(&a, &a) {
			t.Fatal("a layout is not the same as itself")
		}
		for _, path := range paths {
			name := pathName(typ, path)
			vs, ok := changes(reflect.ValueOf(&a).Elem().FieldByIndex(path))
			if !ok {
				t.Fatalf("%s is a %s: teach sameLayout and this test to compare it", name, reflect.ValueOf(a).FieldByIndex(path).Type())
			}
			for i, v := range vs {
				b := start
				settable(reflect.ValueOf(&b).Elem(), path).Set(v)
				if got, want := sameLayout(&a, &b), reflect.DeepEqual(a, b); got != want {
					t.Errorf("%s, change %d: sameLayout %v, reflect.DeepEqual %v", name, i, got, want)
				}
				checks++
			}
		}
	}
	if checks < 100 {
		t.Fatalf("only %d changes checked", checks)
	}
}

// A LayoutMemo keeps its own copy of a layout's lists: a plan whose
// StageLayers are written again in place after a check is checked anew.
func TestLayoutMemoOwnsItsLists(t *testing.T) {
	stages := []int64{1, 1}
	raw := Parallelism{PP: 2, StageLayers: stages}
	var m LayoutMemo
	m.layout(nil, &raw)
	stages[0] = 2
	if sameLayout(&m.raw, &raw) {
		t.Fatal("the memo's layout changed with the plan's list")
	}
}
