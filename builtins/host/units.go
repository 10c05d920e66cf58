package host

import (
	"math"

	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// unitBuiltins: byte units as plain ints, and fmt_bytes.
func UnitBuiltins() []Builtin {
	unit := func(name string, n int64, doc string) Builtin {
		return Builtin{Name: name, Sig: name, Doc: doc, Value: starlark.MakeInt64(n)}
	}
	return []Builtin{
		unit("KiB", 1<<10, "KiB is 1024 bytes (an int). Memory figures are plain ints of bytes: 24 * GiB."),
		unit("MiB", 1<<20, "MiB is 1024² = 1,048,576 bytes (an int)."),
		unit("GiB", 1<<30, "GiB is 1024³ = 1,073,741,824 bytes (an int). PyTorch and nvidia-smi report in these units."),
		unit("TiB", 1<<40, "TiB is 1024⁴ bytes (an int)."),
		unit("KB", 1e3, "KB is 1000 bytes (an int). Datasheets and many papers use decimal units."),
		unit("MB", 1e6, "MB is 10⁶ bytes (an int)."),
		unit("GB", 1e9, "GB is 10⁹ bytes (an int): an \"80GB\" card holds 80 GB, about 74.5 GiB."),
		unit("TB", 1e12, "TB is 10¹² bytes (an int)."),
		{
			Name: "fmt_bytes",
			Sig:  "fmt_bytes(n, decimal=False)",
			Doc: "Formats n bytes for humans with two decimals: fmt_bytes(11135229952) is \"10.37 GiB\", " +
				"fmt_bytes(512) is \"512 B\". With decimal=True it uses powers of 1000: \"11.14 GB\". " +
				"n is an int (or a float, rounded to the nearest byte); negative values keep their sign.",
			Fn: fmtBytes,
		},
	}
}

func fmtBytes(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var n starlark.Value
	decimal := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "n", &n, "decimal?", &decimal); err != nil {
		return nil, err
	}
	if f, ok := n.(starlark.Float); ok {
		n = starlark.Float(math.Round(float64(f)))
	}
	v, err := AsInt64(n, "n")
	if err != nil {
		return nil, err
	}
	if decimal {
		return starlark.String(units.FormatBytesDecimal(v)), nil
	}
	return starlark.String(units.FormatBytes(v)), nil
}

// Column units, for rendering and for plots' axis labels.
const (
	UnitBytes    = "bytes"    // an int of bytes
	UnitSeconds  = "seconds"  // a float of seconds
	UnitFraction = "fraction" // a float from 0 to 1, shown as a percentage
)
