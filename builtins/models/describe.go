package models

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// ModuleTable is what model.describe() returns (type "module_table"): one
// row per module with its path, kind, shape summary and parameter count.
// print() renders it as an aligned table; .rows gives the data.
type ModuleTable struct {
	title string
	rows  []core.ModuleRow
	total int64
}

var _ starlark.HasAttrs = (*ModuleTable)(nil)

func (t *ModuleTable) Type() string         { return "module_table" }
func (t *ModuleTable) Freeze()              {}
func (t *ModuleTable) Truth() starlark.Bool { return starlark.True }
func (t *ModuleTable) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: module_table")
}

// String renders the table:
//
//	llama: 6,738,415,616 parameters
//	module   kind       summary        params
//	embed    embedding  32000 x 4096   131,072,000
func (t *ModuleTable) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s parameters\n", t.title, host.Thousands(t.total))
	g := &host.TextGrid{Right: []bool{false, false, false, true}}
	g.Add("module", "kind", "summary", "params")
	for _, r := range t.rows {
		g.Add(r.Path, r.Kind, r.Summary, host.Thousands(r.Params))
	}
	g.Write(&b, "")
	return strings.TrimSuffix(b.String(), "\n")
}

var moduleTableAttrNames = []string{"params", "rows"}

func (t *ModuleTable) AttrNames() []string { return moduleTableAttrNames }

func (t *ModuleTable) Attr(name string) (starlark.Value, error) {
	switch name {
	case "params":
		return starlark.MakeInt64(t.total), nil
	case "rows":
		out := make([]starlark.Value, len(t.rows))
		for i, r := range t.rows {
			out[i] = starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
				"path":    starlark.String(r.Path),
				"kind":    starlark.String(r.Kind),
				"summary": starlark.String(r.Summary),
				"params":  starlark.MakeInt64(r.Params),
			})
		}
		l := starlark.NewList(out)
		l.Freeze()
		return l, nil
	}
	return nil, nil
}
