package host

import (
	"fmt"
	"math"

	"go.starlark.net/starlark"
)

// AsInt64 converts an int, or a float with a whole value (80e9), to int64.
// what names the argument in errors ("memory").
func AsInt64(v starlark.Value, what string) (int64, error) {
	switch x := v.(type) {
	case starlark.Int:
		n, ok := x.Int64()
		if !ok {
			return 0, fmt.Errorf("%s out of range (got %s, want an int within ±9.2e18)", what, x)
		}
		return n, nil
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
			return 0, fmt.Errorf("%s must be a whole number (got %s)", what, x)
		}
		if f >= math.MaxInt64 || f < math.MinInt64 {
			return 0, fmt.Errorf("%s out of range (got %s, want an int within ±9.2e18)", what, x)
		}
		return int64(f), nil
	}
	return 0, fmt.Errorf("%s must be an int (got %s)", what, v.Type())
}

// AsFloat converts an int or a finite float to float64. what names the
// argument in errors.
func AsFloat(v starlark.Value, what string) (float64, error) {
	switch x := v.(type) {
	case starlark.Int:
		return float64(x.Float()), nil
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%s must be finite (got %s)", what, x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("%s must be a number (got %s)", what, v.Type())
}
