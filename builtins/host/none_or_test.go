package host

import (
	"testing"

	"go.starlark.net/starlark"
)

func TestNoneOr(t *testing.T) {
	var names NoneOr[starlark.Indexable]
	err := starlark.UnpackArgs("f", nil, []starlark.Tuple{{starlark.String("names"), starlark.MakeInt(3)}}, "names?", &names)
	if want := `f: for parameter "names": got int, want a list or tuple or None`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if err := starlark.UnpackArgs("f", nil, []starlark.Tuple{{starlark.String("names"), starlark.NewList(nil)}}, "names?", &names); err != nil || names.V == nil {
		t.Errorf("a list: got %v, %v", names.V, err)
	}
	for _, tc := range []struct {
		kwargs []starlark.Tuple
		want   string
		err    string
	}{
		{nil, "", ""},
		{[]starlark.Tuple{{starlark.String("p"), starlark.None}}, "", ""},
		{[]starlark.Tuple{{starlark.String("p"), starlark.String("x.*")}}, "x.*", ""},
		{[]starlark.Tuple{{starlark.String("p"), starlark.MakeInt(3)}}, "", `f: for parameter "p": got int, want string or None`},
	} {
		var p NoneOr[string]
		err := starlark.UnpackArgs("f", nil, tc.kwargs, "p?", &p)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%v: got %v, want error %q", tc.kwargs, err, tc.err)
			}
			continue
		}
		if err != nil || p.V != tc.want {
			t.Errorf("%v: got %q, %v; want %q", tc.kwargs, p.V, err, tc.want)
		}
	}
}
