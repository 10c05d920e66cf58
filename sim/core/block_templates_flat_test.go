package core

import (
	"reflect"
	"testing"
)

// lowerConf.same compares lowerFlat with ==, which is reflect.DeepEqual's
// verdict only while lowerFlat holds no reference at any depth: a
// pointer (DeepEqual compares what it points to, == its address), a
// slice, map or func (not comparable), an interface (== panics on a
// dynamic value that is not comparable). A field of such a kind belongs
// in lowerConf beside flat.
func TestLowerFlatHoldsNoReference(t *testing.T) {
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				walk(f.Type, path+"."+f.Name)
			}
		case reflect.Array:
			walk(typ.Elem(), path+"[i]")
		case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map, reflect.Func, reflect.Chan, reflect.UnsafePointer:
			t.Errorf("%s is a %s: lowerFlat's == would not be reflect.DeepEqual's verdict", path, typ)
		}
	}
	walk(reflect.TypeOf(lowerFlat{}), "lowerFlat")
}

// same agrees with reflect.DeepEqual on configurations that differ in
// one field of flat, in a pointed-to value alone, and not at all.
func TestLowerConfSameAsDeepEqual(t *testing.T) {
	base := func() lowerConf {
		c := lowerConf{flat: lowerFlat{batch: 2, seq: 4096, reuseStrip: "x"}, ckpt: Checkpoint{Mode: "blocks", Blocks: []Checkpoint{{Mode: "full"}}},
			lora: &LoRA{Rank: 8}}
		c.flat.par.Tp = 4
		return c
	}
	for _, c := range []struct {
		name string
		edit func(*lowerConf)
	}{
		{"equal", func(*lowerConf) {}},
		{"flat scalar", func(c *lowerConf) { c.flat.seq = 2048 }},
		{"flat nested", func(c *lowerConf) { c.flat.par.Tp = 8 }},
		{"flat string", func(c *lowerConf) { c.flat.reuseStrip = "y" }},
		{"pointer, equal value", func(c *lowerConf) { c.lora = &LoRA{Rank: 8} }},
		{"pointer, other value", func(c *lowerConf) { c.lora = &LoRA{Rank: 16} }},
		{"checkpoint blocks", func(c *lowerConf) { c.ckpt.Blocks = []Checkpoint{{Mode: "none"}} }},
		{"finetune", func(c *lowerConf) { c.flat.hasFt, c.ft.docs = true, []int64{8} }},
	} {
		a, b := base(), base()
		c.edit(&b)
		if b.flat.hasFt {
			a.flat.hasFt = true // both with a Finetune, b's other
		}
		if got, want := a.same(&b), reflect.DeepEqual(&a, &b); got != want {
			t.Errorf("%s: same %v, reflect.DeepEqual %v", c.name, got, want)
		}
	}
}

// sameCheckpoint agrees with reflect.DeepEqual where any one field of a
// checkpoint policy differs (a new field it does not compare fails
// here), where a slice is nil in one and empty in the other, and where
// they are equal.
func TestSameCheckpointAsDeepEqual(t *testing.T) {
	base := func() Checkpoint {
		return Checkpoint{Mode: "blocks", Every: 2, Modules: []string{"mlp"}, Save: []string{"mm"},
			Blocks: []Checkpoint{{Mode: "full", Save: []string{}}, {Mode: "none"}}, Budget: Budget{Fraction: 0.5}}
	}
	check := func(what string, a, b Checkpoint) {
		t.Helper()
		if got, want := sameCheckpoint(&a, &b), reflect.DeepEqual(a, b); got != want {
			t.Errorf("%s: sameCheckpoint %v, reflect.DeepEqual %v", what, got, want)
		}
	}
	check("equal", base(), base())
	typ := reflect.TypeOf(Checkpoint{})
	for i := range typ.NumField() {
		a, b := base(), base()
		f := reflect.ValueOf(&b).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int:
			f.SetInt(f.Int() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
		case reflect.Struct: // Budget
			f.Field(0).SetFloat(f.Field(0).Float() + 1)
		default:
			t.Fatalf("Checkpoint.%s is a %s: teach sameCheckpoint and this test to compare it", typ.Field(i).Name, f.Kind())
		}
		if sameCheckpoint(&a, &b) {
			t.Errorf("Checkpoint.%s differs, sameCheckpoint says equal", typ.Field(i).Name)
		}
		check("field "+typ.Field(i).Name, a, b)
	}
	a, b := base(), base()
	b.Modules = []string{}
	a.Modules = nil
	check("nil and empty Modules", a, b)
	a, b = base(), base()
	b.Blocks[0].Save = nil
	check("a block's nil and empty Save", a, b)
	a, b = base(), base()
	b.Budget.Bytes = 1
	check("Budget.Bytes", a, b)
}
