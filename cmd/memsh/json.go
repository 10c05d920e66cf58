package main

import (
	"fmt"
	"io"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/tables"
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

// csvTables writes emitted tables to w as CSV (memsh run --csv), a blank
// line between two tables; any other emitted value is an error that
// points to --json.
type csvTables struct {
	w     io.Writer
	count *int
}

func (c csvTables) emit(_ *starlark.Thread, e host.Emitted) error {
	t, ok := e.Value.(*tables.ResultTable)
	if !ok {
		return fmt.Errorf("memsh run --csv writes tables (sweep(), search(), tabulate()); emit(%s) needs --json", e.Value.Type())
	}
	sep := ""
	if *c.count > 0 {
		sep = "\n"
	}
	*c.count++
	_, err := io.WriteString(c.w, sep+t.CSV())
	return err
}
