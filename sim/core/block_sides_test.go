package core

import (
	"reflect"
	"regexp"
	"testing"
	"unsafe"
)

// sameAsDeepEqual is sameAs as it was before session 43, the verdict
// sameAs must keep: the progress fields cleared, then reflect.DeepEqual
// of the builders and of the program headers.
func sameAsDeepEqual(s *sides, b *Builder) bool {
	var now sides
	now.of(b)
	was := *s
	x, y := &was.b, &now.b
	for _, z := range [...]*Builder{x, y} {
		z.P, z.prefix, z.names, z.taken, z.block, z.clones, z.inName, z.scopes, z.unscope, z.stop, z.fusedInputs, z.templates =
			nil, "", nil, nil, 0, cloneArena{}, nameWatch{}, nil, nil, nil, nil, nil
	}
	p, q := &was.p, &now.p
	for _, z := range [...]*Program{p, q} {
		z.Ops, z.Values, z.Params, z.Regions, z.Graphs, z.Comm, z.Buffers = nil, nil, nil, nil, nil, nil, nil
		z.Held, z.HeldForward, z.HeldBackward, z.Tables = nil, nil, nil, nil
	}
	return was.teInput == now.teInput && was.aoGrad == now.aoGrad && was.aoFP8 == now.aoFP8 && was.loraHits == now.loraHits &&
		was.dead == now.dead && reflect.DeepEqual(x, y) && reflect.DeepEqual(p, q)
}

// leaves lists the paths (field indexes) to every field of a struct
// type, through nested structs (not through pointers, slices or maps).
func leaves(typ reflect.Type, at []int, out *[][]int) {
	for i := range typ.NumField() {
		path := append(append([]int(nil), at...), i)
		if f := typ.Field(i).Type; f.Kind() == reflect.Struct {
			leaves(f, path, out)
		} else {
			*out = append(*out, path)
		}
	}
}

// settable is v's field at path, writable though unexported.
func settable(v reflect.Value, path []int) reflect.Value {
	f := v.FieldByIndex(path)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// pathName is path's field names under typ.
func pathName(typ reflect.Type, path []int) string {
	name := typ.Name()
	for _, i := range path {
		name += "." + typ.Field(i).Name
		typ = typ.Field(i).Type
	}
	return name
}

// changes are the values f may be set to that differ from its own, or
// point to (or hold) values equal to its own from a new place; ok is
// false for a kind the test does not know.
func changes(f reflect.Value) (out []reflect.Value, ok bool) {
	typ := f.Type()
	n := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.Bool:
		n.SetBool(!f.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n.SetInt(f.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n.SetUint(f.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		n.SetFloat(f.Float() + 1)
	case reflect.String:
		n.SetString(f.String() + "x")
	case reflect.Pointer:
		n.Set(reflect.New(typ.Elem())) // a new zero value (or nil's opposite)
		if !f.IsNil() {
			same := reflect.New(typ.Elem())
			same.Elem().Set(f.Elem()) // equal, elsewhere
			out = append(out, same, reflect.Zero(typ))
		}
	case reflect.Map:
		n.Set(reflect.MakeMap(typ)) // empty, not nil
		if !f.IsNil() {
			same := reflect.MakeMap(typ)
			for it := f.MapRange(); it.Next(); {
				same.SetMapIndex(it.Key(), it.Value())
			}
			more := reflect.MakeMap(typ)
			more.SetMapIndex(reflect.New(typ.Key()).Elem(), reflect.New(typ.Elem()).Elem())
			out = append(out, same, more, reflect.Zero(typ))
		}
	case reflect.Slice:
		n.Set(reflect.MakeSlice(typ, 0, 1)) // empty, not nil
		if !f.IsNil() {
			same := reflect.AppendSlice(reflect.MakeSlice(typ, 0, f.Len()), f)
			out = append(out, same, reflect.Append(same, reflect.New(typ.Elem()).Elem()), reflect.Zero(typ))
		}
	case reflect.Func:
		n.Set(reflect.MakeFunc(typ, func([]reflect.Value) []reflect.Value { return nil }))
	default:
		return nil, false
	}
	return append(out, n), true
}

// sidesBuilder is a builder whose references are set, each to something
// of its own, for sameAs to compare.
func sidesBuilder() *Builder {
	dead := []Value{3}
	b := &Builder{P: &Program{Input: 1, BatchExtra: []Value{2}, Docs: []int64{8}, Float8Skipped: []string{"lm_head"},
		QuantSkipped: []string{}, Stage: &stageProg{}, Ops: []OpInfo{{}}}, Batch: 2, Seq: 4096,
		Ckpt: Checkpoint{Mode: "blocks", Blocks: []Checkpoint{{Mode: "full"}}}, Lora: &LoRA{Rank: 8},
		teInput: map[Value][2]Value{1: {2, 3}}, aoInput: aoInputs{grad: map[Value]Value{1: 2}, fp8: map[Value]Value{}},
		dead: &dead, prefix: "model.layers.0", names: map[scopedLayer]string{}, taken: map[string]int{"a": 1},
		loraHits: map[string]bool{"q_proj": true}, loraRe: regexp.MustCompile("q_proj"), pref: &Preference{},
		castCache: map[castKey]Value{}, headCast: map[int32]Value{1: 2}, Cross: &CrossStates{}, Deepstack: &DeepstackStates{},
		shared: map[string]Value{"per_layer": 4}, decoderLayers: map[*Repeat]bool{}, scopes: []string{"x"},
		fusedInputs: map[fusedInput]bool{}, templates: &BlockTemplates{}, unscope: func() {}}
	b.ft = Finetune{quant: "nf4", freeze: []string{"embed"}, trainable: []*regexp.Regexp{regexp.MustCompile("lm_head")},
		trainablePatterns: []string{"lm_head"}, liger: &LigerCE{}, docs: []int64{1024}}
	b.Ft = &b.ft
	return b
}

// sameAs agrees with sameAsDeepEqual where any one field of the builder,
// of its program's header or of a struct inside them (its Finetune, its
// parallelism) differs, holds an equal value from elsewhere or is
// cleared, starting from a builder with its references set and from the
// zero builder; and where nothing changed. A field added to Builder or
// Program that sameAs does not compare (and is no progress) fails here.
func TestSidesSameAsDeepEqual(t *testing.T) {
	checks := 0
	for _, start := range []struct {
		name string
		make func() *Builder
	}{{"set", sidesBuilder}, {"zero", func() *Builder { return &Builder{P: &Program{}} }}} {
		var s sides
		b := start.make()
		s.of(b)
		if !s.sameAs(b) || !sameAsDeepEqual(&s, b) {
			t.Fatalf("%s: a builder is not the same as itself", start.name)
		}
		for _, of := range []struct {
			root func(*Builder) reflect.Value
			typ  reflect.Type
		}{
			{func(b *Builder) reflect.Value { return reflect.ValueOf(b).Elem() }, reflect.TypeOf(Builder{})},
			{func(b *Builder) reflect.Value { return reflect.ValueOf(b.P).Elem() }, reflect.TypeOf(Program{})},
		} {
			var paths [][]int
			leaves(of.typ, nil, &paths)
			for _, path := range paths {
				name := start.name + ": " + pathName(of.typ, path)
				if name == start.name+": Builder.P" {
					continue // the program, whose header the second root changes
				}
				b := start.make()
				var s sides
				s.of(b)
				was := settable(of.root(b), path)
				vs, ok := changes(was)
				if !ok {
					t.Fatalf("%s is a %s: teach sameAs and this test to compare it", name, was.Type())
				}
				for i, v := range vs {
					b := start.make()
					var s sides
					s.of(b)
					settable(of.root(b), path).Set(v)
					if got, want := s.sameAs(b), sameAsDeepEqual(&s, b); got != want {
						t.Errorf("%s, change %d: sameAs %v, reflect.DeepEqual %v", name, i, got, want)
					}
					checks++
				}
			}
		}
	}
	if checks < 200 {
		t.Fatalf("only %d changes checked", checks)
	}
}
