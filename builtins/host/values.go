package host

// Frozen Starlark values the builtins build their results from.

import (
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// record is a struct, or (plain) a dict with sorted keys.
func Record(plain bool, f starlark.StringDict) starlark.Value {
	if !plain {
		return NewStruct(f)
	}
	d := starlark.NewDict(len(f))
	for _, k := range f.Keys() {
		d.SetKey(starlark.String(k), f[k])
	}
	d.Freeze()
	return d
}

func NewStruct(f starlark.StringDict) *starlarkstruct.Struct {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, f)
}

func FrozenList(vs []starlark.Value) *starlark.List {
	l := starlark.NewList(vs)
	l.Freeze()
	return l
}

// frozenDict builds a dict from alternating string keys and values, in order.
func FrozenDict(kv ...any) *starlark.Dict {
	d := starlark.NewDict(len(kv) / 2)
	for i := 0; i+1 < len(kv); i += 2 {
		d.SetKey(starlark.String(kv[i].(string)), kv[i+1].(starlark.Value))
	}
	d.Freeze()
	return d
}
