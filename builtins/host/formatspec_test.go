package host

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// TestFormatSpec holds format() to Python: every want is what CPython
// 3.12's format(value, spec) returns for the same value and spec.
func TestFormatSpec(t *testing.T) {
	bigTen20 := starlark.MakeBigInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(20), nil))
	negZero := starlark.Float(math.Copysign(0, -1))
	for _, tc := range []struct {
		v          starlark.Value
		spec, want string
	}{
		{starlark.Float(3.14159), ".2f", "3.14"},
		{starlark.String("gpu"), "<8", "gpu     "},
		{starlark.MakeInt64(1234567), ",", "1,234,567"},
		{starlark.Float(0.4312), ".1%", "43.1%"},
		{starlark.MakeInt64(42), ">6", "    42"},
		{starlark.MakeInt64(-3), "+05d", "-0003"},
		{starlark.MakeInt64(255), "#x", "0xff"},
		{starlark.MakeInt64(42), "*>6", "****42"},
		{starlark.MakeInt64(1234), "09,d", "0,001,234"},
		{starlark.MakeInt64(-1234), "010,d", "-0,001,234"},
		{starlark.MakeInt64(1234), "08,d", "0,001,234"},
		{starlark.Float(1234.5), ",", "1,234.5"},
		{starlark.Float(1234.5678), ",.2f", "1,234.57"},
		{negZero, "z.1f", "0.0"},
		{negZero, ".1f", "-0.0"},
		{starlark.String("ab"), "^5", " ab  "},
		{starlark.String("ab"), "*^6", "**ab**"},
		{starlark.MakeInt64(5), "<05", "50000"},
		{starlark.String("ab"), "<05", "ab000"},
		{starlark.Float(3.0), "", "3.0"},
		{starlark.Float(1e+20), "", "1e+20"},
		{starlark.Float(0.1), "", "0.1"},
		{starlark.Float(1.0), ".3", "1.0"},
		{starlark.Float(1234.5), ".3", "1.23e+03"},
		{starlark.Float(1e-05), "g", "1e-05"},
		{starlark.Float(123456789.0), "g", "1.23457e+08"},
		{starlark.Float(1.5), "e", "1.500000e+00"},
		{starlark.Float(1.5), "E", "1.500000E+00"},
		{starlark.Float(math.Inf(1)), "f", "inf"},
		{starlark.Float(math.NaN()), "F", "NAN"},
		{starlark.Float(math.Inf(-1)), "+.1f", "-inf"},
		{starlark.MakeInt64(255), "b", "11111111"},
		{starlark.MakeInt64(255), "#o", "0o377"},
		{starlark.MakeInt64(255), "X", "FF"},
		{starlark.MakeInt64(65), "c", "A"},
		{bigTen20, ",", "100,000,000,000,000,000,000"},
		{starlark.MakeInt64(-7), " d", "-7"},
		{starlark.MakeInt64(7), " d", " 7"},
		{starlark.MakeInt64(7), "+", "+7"},
		{starlark.Float(2.5), "%", "250.000000%"},
		{starlark.Float(0.123456), ".2%", "12.35%"},
		{starlark.MakeInt64(12), "_b", "1100"},
		{starlark.MakeInt64(1234567), "_d", "1_234_567"},
		{starlark.String("hello"), ".3", "hel"},
		{starlark.String("hello"), "10.3", "hel       "},
		{starlark.MakeInt64(1), ".2f", "1.00"},
		{starlark.MakeInt64(100), "e", "1.000000e+02"},
		{starlark.Float(1e+100), ".3g", "1e+100"},
		{starlark.Float(-1.25), "=+10.2f", "-     1.25"},
		{starlark.Float(123.456), "010.2f", "0000123.46"},
		{starlark.Float(0.0001234), "g", "0.0001234"},
		{starlark.Float(1.234e-05), ".2g", "1.2e-05"},
		{starlark.String("x"), "", "x"},
		{starlark.True, "", "True"},
		{starlark.Float(12.0), "n", "12"},
		{starlark.Float(-12345.678), "015,.1f", "-0,000,012,345.7"},
		// memsh's own choices, where Python has none: bools and None.
		{starlark.True, ">6", "  True"},
		{starlark.False, "d", "0"},
		{starlark.None, "<6", "None  "},
	} {
		got, err := FormatSpec(tc.v, tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("format(%s, %q) = %q, %v; want %q", tc.v, tc.spec, got, err, tc.want)
		}
	}
}

func TestFormatSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		v          starlark.Value
		spec, want string
	}{
		{starlark.String("a"), ".2f", `type 'f' in spec ".2f" needs a number (got a string)`},
		{starlark.String("a"), "+", "a sign, z, #, grouping and = alignment apply to numbers"},
		{starlark.MakeInt64(3), ".2", "an int takes no precision with an integer type"},
		{starlark.MakeInt64(3), ",x", ", groups decimal numbers"},
		{starlark.MakeInt64(3), "#d", "# applies to b, o, x and X"},
		{starlark.Float(3), "x", `type 'x' in spec "x" does not apply to a float`},
		{starlark.Float(3), ".q", "a precision is digits after the dot"},
		{starlark.Float(3), "5q", `unexpected "q"`},
		{starlark.MakeInt64(3), "99999", "widths and precisions are at most 10000"},
		{starlark.MakeInt64(-1), "c", "type c needs a code point"},
	} {
		_, err := FormatSpec(tc.v, tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("format(%s, %q): error %v, want one containing %q", tc.v, tc.spec, err, tc.want)
		}
	}
}
