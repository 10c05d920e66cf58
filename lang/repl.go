package lang

import (
	"context"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// ExecSource parses src (a REPL chunk, named like "<stdin:3>") with
// REPLFileOptions and executes it against globals, which it updates, even
// on error. Start globals with Globals().
func (in *Interpreter) ExecSource(ctx context.Context, name string, src []byte, globals starlark.StringDict) error {
	in.AddSource(name, src)
	f, err := REPLFileOptions().Parse(name, src, 0)
	if err != nil {
		return err
	}
	return in.ExecChunk(ctx, f, globals)
}

// ExecChunk executes a chunk the caller parsed with REPLFileOptions (whose
// text it recorded with AddSource) against globals, which it updates.
func (in *Interpreter) ExecChunk(ctx context.Context, f *syntax.File, globals starlark.StringDict) (err error) {
	defer recoverPanic(f.Path, &err) // guard.go
	if in.root == nil {
		if err := in.openRoot("."); err != nil {
			return err
		}
	}
	thread, stop := in.NewThread(ctx)
	defer stop()
	return starlark.ExecREPLChunk(f, thread, globals)
}

// EvalExpr evaluates one expression against globals.
func (in *Interpreter) EvalExpr(ctx context.Context, expr syntax.Expr, globals starlark.StringDict) (v starlark.Value, err error) {
	defer recoverPanic("the expression", &err) // guard.go
	if in.root == nil {
		if err := in.openRoot("."); err != nil {
			return nil, err
		}
	}
	thread, stop := in.NewThread(ctx)
	defer stop()
	return starlark.EvalExprOptions(REPLFileOptions(), thread, expr, globals)
}
