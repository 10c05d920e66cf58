package reports

import (
	"bytes"
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/perfetto"
	"github.com/memsh/memsh/snapshot"
	"go.starlark.net/starlark"
)

// Report methods that save the step for other tools, as run --snapshot
// and --trace do, one file per report (a sweep can save each row's):
// the file is named relative to the script, inside its folder tree
// (host.WriteScriptFile).

// reportMethods are the report's methods, by name.
var reportMethods = map[string]func(x *Report) *starlark.Builtin{
	"as_dict":       asDictMethod,
	"save_snapshot": saveMethod("save_snapshot", (*Report).snapshotBytes),
	"save_trace":    saveMethod("save_trace", (*Report).traceBytes),
}

func asDictMethod(x *Report) *starlark.Builtin {
	return starlark.NewBuiltin("as_dict", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
			return nil, err
		}
		return x.AsDict(), nil
	}).BindReceiver(x)
}

// saveMethod is r.NAME(path): the bytes encode gives written to path.
func saveMethod(name string, encode func(x *Report) ([]byte, error)) func(x *Report) *starlark.Builtin {
	return func(x *Report) *starlark.Builtin {
		return starlark.NewBuiltin(name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var path string
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path); err != nil {
				return nil, err
			}
			data, err := encode(x)
			if err != nil {
				return nil, err
			}
			if err := host.WriteScriptFile(thread, path, data); err != nil {
				return nil, err
			}
			return starlark.None, nil
		}).BindReceiver(x)
	}
}

// snapshotBytes is the step as a PyTorch memory snapshot (the pickle
// pytorch.org/memory_viz opens and memsh compare reads).
func (x *Report) snapshotBytes() ([]byte, error) {
	traced, err := x.WithTrace()
	if err != nil {
		return nil, err
	}
	s, err := snapshot.FromReport(traced)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := s.Write(&b); err != nil {
		return nil, fmt.Errorf("cannot write the snapshot: %w", err)
	}
	return b.Bytes(), nil
}

// traceBytes is the step's time as a Perfetto (Chrome trace-event) file.
func (x *Report) traceBytes() ([]byte, error) {
	tr, err := perfetto.FromReport(x.r, x.Title())
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := tr.Write(&b); err != nil {
		return nil, fmt.Errorf("cannot write the trace: %w", err)
	}
	return b.Bytes(), nil
}
