package host

import (
	"errors"
	"strings"

	"go.starlark.net/starlark"
)

// NoneOr unpacks a parameter whose documented default is None
// (starlark.UnpackArgs with &x, x a NoneOr[T]): None, written or left
// out, keeps V's zero value; any other value unpacks into V as
// UnpackArgs unpacks a T, so lora(target_pattern=None) means what
// lora() does.
type NoneOr[T any] struct{ V T }

// Unpack implements starlark.Unpacker.
func (n *NoneOr[T]) Unpack(v starlark.Value) error {
	if v == starlark.None {
		*n = NoneOr[T]{}
		return nil
	}
	if err := starlark.UnpackPositionalArgs("", starlark.Tuple{v}, nil, 1, &n.V); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "got "); i >= 0 { // "got int, want string" without its "for parameter 1"
			msg = msg[i:]
		}
		msg = strings.ReplaceAll(msg, "starlark.Indexable", "a list or tuple") // the Go type's name, as UnpackArgs writes it
		return errors.New(msg + " or None")
	}
	return nil
}
