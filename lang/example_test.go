package lang_test

import (
	"context"
	"os"
	"testing/fstest"

	"github.com/memsh/memsh/lang"
)

// A host runs a script and reports its error, if any, in memsh's format.
func ExampleInterpreter_RunFile() {
	files := fstest.MapFS{
		"plan.star": {Data: []byte("load('@stdlib//units.star', 'to_gib')\nprint(to_gib(gpu('H200').memory))\ng = gpu('H300')\n")},
	}
	in := lang.New(lang.Options{Stdout: os.Stdout, Files: files})
	defer in.Close()
	if _, err := in.RunFile(context.Background(), "plan.star"); err != nil {
		in.FormatError(os.Stdout, err, false)
	}
	// Output:
	// 139.80072021484375
	// plan.star:3:8: error: unknown gpu "H300" (close matches: H200, B200)
	//     3 | g = gpu('H300')
	//       |        ^
}

// A REPL executes chunks against one set of globals.
func ExampleInterpreter_ExecSource() {
	in := lang.New(lang.Options{Stdout: os.Stdout, Files: fstest.MapFS{}})
	globals := in.Globals()
	ctx := context.Background()
	in.ExecSource(ctx, "<stdin:1>", []byte("x = fmt_bytes(3 * GiB)\n"), globals)
	in.ExecSource(ctx, "<stdin:2>", []byte("print(x)\n"), globals)
	// Output:
	// 3.00 GiB
}
