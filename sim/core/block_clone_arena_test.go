package core

import "testing"

// spells reads a text as parts joined by a separator, or by none.
func TestSpells(t *testing.T) {
	cases := []struct {
		s     string
		sep   byte
		parts []string
		want  bool
	}{
		{"layers.0.mlp", '.', []string{"layers.0", "mlp"}, true},
		{"layers.0.mlp", '.', []string{"layers", "0.mlp"}, true},
		{"layers.0.mlp", '.', []string{"layers.0", "ml"}, false},
		{"layers.0.mlp", '.', []string{"layers.0", "mlpx"}, false},
		{"layers.0xmlp", '.', []string{"layers.0", "mlp"}, false},
		{"layers.0.mlp", 0, []string{"layers.0", ".mlp"}, true},
		{"layers.0.mlp", 0, []string{"layers.0", "mlp"}, false},
		{"output of linear a", 0, []string{"output of linear ", "a"}, true},
		{"", 0, []string{"", ""}, true},
		{"a", '.', []string{"a", ""}, false},
	}
	for _, c := range cases {
		if got := spells(c.s, c.sep, c.parts); got != c.want {
			t.Errorf("spells(%q, %q, %q) = %v, want %v", c.s, c.sep, c.parts, got, c.want)
		}
	}
}

// A lowering takes the last lowering's string of a call at its place or
// fewer than recallAhead places past it (an op the last lowering had and this
// one has not), and writes its own past that; a lowering without
// buffers recalls nothing.
func TestRecall(t *testing.T) {
	last := []string{"a.x", "a.y", "b.x", "b.y", "c.x", "c.y"}
	for len(last) < recallAhead {
		last = append(last, "f.f")
	}
	last = append(last, "d.x") // recallAhead places past the first
	cases := []struct {
		name  string
		calls [][2]string
		found []bool
	}{
		{"same calls", [][2]string{{"a", "x"}, {"a", "y"}, {"b", "x"}}, []bool{true, true, true}},
		{"a call the last lowering had not", [][2]string{{"a", "x"}, {"z", "z"}, {"a", "y"}}, []bool{true, false, true}},
		{"calls the last lowering had skipped", [][2]string{{"a", "x"}, {"b", "y"}, {"c", "x"}}, []bool{true, true, true}},
		{"too far ahead", [][2]string{{"d", "x"}}, []bool{false}},
		{"behind", [][2]string{{"b", "x"}, {"a", "x"}}, []bool{true, false}},
	}
	for _, c := range cases {
		var r recall
		r.next = last
		r.start()
		for i, call := range c.calls {
			s, ok := r.recalled('.', call[0], call[1])
			if ok != c.found[i] {
				t.Fatalf("%s: call %d (%s.%s) recalled %v, want %v", c.name, i, call[0], call[1], ok, c.found[i])
			}
			if !ok {
				s = call[0] + "." + call[1]
				r.remember(s)
			}
			if s != call[0]+"."+call[1] || r.next[len(r.next)-1] != s {
				t.Fatalf("%s: call %d: %q, recorded %q", c.name, i, s, r.next)
			}
		}
		if len(r.next) != len(c.calls) {
			t.Fatalf("%s: %d strings recorded for %d calls", c.name, len(r.next), len(c.calls))
		}
	}
	var off recall // no buffers
	off.next = last
	if _, ok := off.recalled('.', "a", "x"); ok {
		t.Fatal("a lowering without buffers recalled a string")
	}
	if off.remember("a.x"); len(off.next) != len(last) {
		t.Fatal("a lowering without buffers recorded a string")
	}
}
