package plans

import (
	"fmt"

	"go.starlark.net/syntax"
)

// compareEqual answers == and != from eq, whether two settings' values
// are equal, and refuses the orderings (what names the values in the
// error: "layouts").
func compareEqual(op syntax.Token, eq bool, what string) (bool, error) {
	switch op {
	case syntax.EQL:
		return eq, nil
	case syntax.NEQ:
		return !eq, nil
	}
	return false, fmt.Errorf("%s not supported for %s", op, what)
}
