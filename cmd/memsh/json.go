package main

import (
	"io"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
)

// jsonLines writes emitted values to w as JSON documents, one per line
// (memsh run --json; schema in docs/json.md).
type jsonLines struct{ w io.Writer }

func (j jsonLines) emit(thread *starlark.Thread, e host.Emitted) error {
	line, err := builtins.JSONDocument(thread, e)
	if err != nil {
		return err
	}
	_, err = j.w.Write(append(line, '\n'))
	return err
}
