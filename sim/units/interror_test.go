package units

import (
	"errors"
	"testing"
)

// TestIntError: an IntError reads as the *Error it stands for, in its
// text, its message, through errors.As and worded; with more than two
// arguments the *Error is made at once.
func TestIntError(t *testing.T) {
	for _, row := range []struct {
		path, format, hint string
		args               []int64
	}{
		{"layers.0-79.self_attn", "cp=%d does not divide the %d attention heads of each tensor-parallel rank (Ulysses splits heads)", "use ring", []int64{16, 8}},
		{"parallel", "sequence_parallel: tp=%d does not divide %d", "", []int64{3, 8192}},
		{"", "one %d", "h", []int64{-1}},
		{"p", "none", "", nil},
		{"p", "width %5d", "", []int64{7}},
		{"p", "%d %d %d", "three", []int64{1, 2, 3}},
	} {
		want := &Error{Path: row.path, Msg: IntMsg(row.format, row.args...), Hint: row.hint}
		err := NewIntError(row.path, row.format, row.hint, row.args...)
		if err.Error() != want.Error() {
			t.Errorf("%q: Error() = %q, want %q", row.format, err.Error(), want.Error())
		}
		var got *Error
		if !errors.As(err, &got) || *got != *want {
			t.Errorf("%q: errors.As = %+v, want %+v", row.format, got, want)
		}
		worded, ok := Worded(err).(*Error)
		if !ok || *worded != *want {
			t.Errorf("%q: Worded = %#v, want %+v", row.format, Worded(err), want)
		}
		if e, ok := err.(*IntError); ok {
			if len(row.args) > 2 {
				t.Errorf("%q: %d arguments kept for later", row.format, len(row.args))
			}
			if msg := string(e.AppendMsg([]byte("x"))); msg != "x"+want.Msg {
				t.Errorf("%q: AppendMsg = %q, want %q", row.format, msg, "x"+want.Msg)
			}
		} else if len(row.args) <= 2 {
			t.Errorf("%q: %T, want an *IntError", row.format, err)
		}
	}
	plain := errors.New("plain")
	if Worded(plain) != plain || Worded(nil) != nil {
		t.Errorf("Worded changed an error that is not an IntError")
	}
}
