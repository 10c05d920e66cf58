package lang

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// TestFormatOriginAtTheError: a value declared where the error is shown
// gets no "declared at" line repeating the header's position
// (search(model, ...) declares its plan at the call).
func TestFormatOriginAtTheError(t *testing.T) {
	se := &units.Error{Origin: "plan.star:1:11", Path: "search", Msg: "tp lists 2 twice", Hint: "list it once"}
	thread := &starlark.Thread{}
	(&host.State{}).Attach(thread)
	fail := starlark.NewBuiltin("search", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return nil, se
	})
	src := "t = search()\n"
	_, err := starlark.ExecFileOptions(FileOptions(), thread, "plan.star", src, starlark.StringDict{"search": fail})
	var b bytes.Buffer
	FormatError(&b, err, ErrorFormat{Sources: MapSource{"plan.star": []byte(src)}})
	want := `plan.star:1:11: error: search: tp lists 2 twice
    1 | t = search()
      |           ^
  hint: list it once
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
