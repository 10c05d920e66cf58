package builtins

import "testing"

func TestUnits(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "KiB", want: "1024"},
		{expr: "MiB", want: "1048576"},
		{expr: "GiB", want: "1073741824"},
		{expr: "TiB", want: "1099511627776"},
		{expr: "KB", want: "1000"},
		{expr: "MB", want: "1000000"},
		{expr: "GB", want: "1000000000"},
		{expr: "TB", want: "1000000000000"},
		{expr: "80 * GB < 80 * GiB", want: "True"},
	})
}

func TestFmtBytes(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "fmt_bytes(2 * 1359281 * 1024 * 4)", want: `"10.37 GiB"`},
		{expr: "fmt_bytes(512)", want: `"512 B"`},
		{expr: "fmt_bytes(1536)", want: `"1.50 KiB"`},
		{expr: "fmt_bytes(2 * 1359281 * 1024 * 4, decimal=True)", want: `"11.14 GB"`},
		{expr: "fmt_bytes(-3 * GiB)", want: `"-3.00 GiB"`},
		{expr: "fmt_bytes(1.5 * KiB)", want: `"1.50 KiB"`},
		{expr: "fmt_bytes(0.4)", want: `"0 B"`},
		{expr: "fmt_bytes(80e9, True)", want: `"80.00 GB"`},
		{expr: `fmt_bytes("1GB")`, err: "n must be an int (got string)"},
		{expr: "fmt_bytes(1 << 70)", err: "n out of range"},
		{expr: "fmt_bytes(float('inf'))", err: "n must be a whole number"},
		{expr: "fmt_bytes()", err: "fmt_bytes: missing argument for n"},
	})
}
