package sim

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkFuzzCorpus runs each committed input of FuzzHFConfig and
// FuzzSizes (testdata/fuzz) as a sub-benchmark: the hostile inputs the
// fuzzer found slow are priced here rather than timed in a test.
//
//	go test ./sim -run '^$' -bench FuzzCorpus -benchtime 1x
func BenchmarkFuzzCorpus(b *testing.B) {
	for _, fuzz := range []string{"FuzzHFConfig", "FuzzSizes"} {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", fuzz, "*"))
		if err != nil || len(files) == 0 {
			b.Fatalf("no corpus for %s: %v", fuzz, err)
		}
		for _, name := range files {
			args, err := corpusArgs(name)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fuzz+"/"+filepath.Base(name), func(b *testing.B) {
				for range b.N {
					runCorpusInput(b, fuzz, args)
				}
			})
		}
	}
}

// runCorpusInput calls the fuzz target's check with one input's values.
func runCorpusInput(b *testing.B, fuzz string, a []any) {
	switch fuzz {
	case "FuzzHFConfig":
		fuzzHFConfigInput(b, a[0].([]byte), a[1].(string), a[2].(string))
	case "FuzzSizes":
		fuzzSizesInput(b, a[0].(byte), a[1].(int64), a[2].(int64), a[3].(int64), a[4].(int64),
			a[5].(int64), a[6].(int64), a[7].(byte), a[8].(byte))
	}
}

// corpusArgs reads a file in go test's corpus format ("go test fuzz v1",
// then one typed Go literal per line, as []byte("..."), string("..."),
// int64(-1), byte('!')), for the types these fuzz targets take.
func corpusArgs(name string) ([]any, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) == 0 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("%s: not a go test fuzz v1 corpus file", name)
	}
	var out []any
	for _, line := range lines[1:] {
		v, err := corpusValue(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v", name, line, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func corpusValue(line string) (any, error) {
	e, err := parser.ParseExpr(line)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil, fmt.Errorf("want a conversion like int64(1)")
	}
	typ := line[:strings.IndexByte(line, '(')]
	arg, neg := call.Args[0], false
	if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		arg, neg = u.X, true
	}
	lit, ok := arg.(*ast.BasicLit)
	if !ok {
		return nil, fmt.Errorf("want a literal argument")
	}
	switch {
	case lit.Kind == token.STRING && (typ == "[]byte" || typ == "string"):
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return nil, err
		}
		if typ == "string" {
			return s, nil
		}
		return []byte(s), nil
	case lit.Kind == token.CHAR && (typ == "byte" || typ == "uint8"):
		r, _, _, err := strconv.UnquoteChar(lit.Value[1:len(lit.Value)-1], '\'')
		return byte(r), err
	case lit.Kind == token.INT && (typ == "byte" || typ == "uint8"):
		n, err := strconv.ParseUint(lit.Value, 0, 8)
		return byte(n), err
	case lit.Kind == token.INT && typ == "int64":
		text := lit.Value
		if neg {
			text = "-" + text
		}
		return strconv.ParseInt(text, 0, 64)
	}
	return nil, fmt.Errorf("unsupported literal %s for %s", lit.Value, typ)
}
