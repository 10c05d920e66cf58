package core

import "testing"

// A name table's template key is the template's text and where the
// module path goes: templates that differ in either are different
// entries (the texts of one path differ: "P.a" and "P.aP.b"), the same
// template is the same entry whichever slice holds it; and a kept text is
// found under its path alone.
func TestNameTableTemplateKey(t *testing.T) {
	table := &NameTable{}
	type tmpl struct {
		text string
		cuts []int32
	}
	cases := []tmpl{
		{".a.b", []int32{0, 2}},
		{".a.b", []int32{0}},
		{".a.b", []int32{2}},
		{".a.b", nil},
		{".a", []int32{0}},
		{".a\x00\x00\x00\x00", nil},                 // {".a", [0]}'s text and cut, as a text without cuts
		{".a\x00\x00\x00\x00\x01\x00\x00\x00", nil}, // {".a", [0]}'s whole key, as a text without cuts
	}
	entries := map[*nameTemplate]int{}
	for i, c := range cases {
		tm := table.template([]byte(c.text), c.cuts)
		if tm == nil {
			t.Fatalf("template %d: none from a table with room", i)
		}
		if j, ok := entries[tm]; ok {
			t.Fatalf("templates %d and %d (%q %v, %q %v) share an entry", j, i, cases[j].text, cases[j].cuts, c.text, c.cuts)
		}
		entries[tm] = i
		again := table.template(append([]byte(nil), c.text...), append([]int32(nil), c.cuts...))
		if again != tm {
			t.Fatalf("template %d: a second lookup made another entry", i)
		}
	}
	tm := table.template([]byte(".a"), []int32{0})
	for _, prefix := range []string{"layers.1", "layers.2"} {
		if _, ok := table.textOf(tm, prefix); ok {
			t.Fatalf("%s: a text before any was kept", prefix)
		}
		text := prefix + ".a"
		s, ok := table.keep(tm, prefix, []byte(text))
		if !ok || s != text {
			t.Fatalf("%s: kept %q, %v", prefix, s, ok)
		}
		if got, ok := table.textOf(tm, prefix); !ok || got != text {
			t.Fatalf("%s: found %q, %v", prefix, got, ok)
		}
	}
	full := NewNameTable(4)
	if full.template([]byte(".a.b"), []int32{0}) != nil {
		t.Fatal("a full table made an entry")
	}
}
