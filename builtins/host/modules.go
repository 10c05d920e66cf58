package host

import (
	"go.starlark.net/lib/json"
	"go.starlark.net/lib/math"
)

// moduleBuiltins: the json and math modules of go.starlark.net.
func ModuleBuiltins() []Builtin {
	return []Builtin{
		{
			Name: "json",
			Sig:  "json",
			Doc: "The json module. json.encode(x) gives compact JSON, json.encode_indent(x, prefix=\"\", indent=\"\\t\") " +
				"indented JSON, json.decode(s, default=unset) parses, json.indent(s) re-indents. " +
				"Reports convert with r.as_dict() first.",
			Value: json.Module,
		},
		{
			Name: "math",
			Sig:  "math",
			Doc: "The math module: math.ceil, math.floor, math.round, math.sqrt, math.log (natural; " +
				"math.log(x, base)), math.pow, math.exp, trigonometry, and the constants math.pi and math.e.",
			Value: math.Module,
		},
	}
}
