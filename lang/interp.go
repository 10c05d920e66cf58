package lang

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/stdlib"
	"go.starlark.net/starlark"
)

// Options configure an Interpreter. The zero value is usable.
type Options struct {
	// MaxSteps limits the Starlark steps of one run (or REPL chunk);
	// 0 means DefaultMaxSteps.
	MaxSteps uint64
	// Stdout receives print() output and reports; nil discards them.
	Stdout io.Writer
	// Color says whether Stdout accepts ANSI colour (for reports).
	Color bool
	// Args are the script's arguments, predeclared as argv (a list of
	// strings).
	Args []string
	// Root is the folder tree that loads and file reads may reach, as a
	// path the user gave. "" means the folder of the main script, or "."
	// before any script ran (the REPL).
	Root string
	// Files, when set, replaces the disk under Root (tests use an
	// fstest.MapFS). Paths in it are relative to Root.
	Files fs.FS
	// AllowRead names more folders that loads and file reads may reach
	// (memsh --allow-read), by a path from the loading file or an
	// absolute path; each is confined as Root is.
	AllowRead []string
	// Stdlib holds the @stdlib modules; nil means the embedded stdlib.FS.
	Stdlib fs.FS
	// MaxMemory is the memory limit of the run in bytes (memsh
	// --max-memory, which watches the heap); builtins that allocate a
	// whole sequence at once refuse one that cannot fit (guard.go). 0
	// means none.
	MaxMemory int64
}

// Interpreter runs memsh scripts. It is not safe for concurrent runs; use
// one per script (or per REPL session).
type Interpreter struct {
	opts        Options
	predeclared starlark.StringDict
	state       *host.State

	mu      sync.Mutex
	sources map[string][]byte  // file name as in positions -> text
	modules map[string]*module // module cache by file name
	loading []string           // files whose execution is under way, outermost first

	root    *fileTree   // the script's folder tree (files.go), opened on first use
	stdlib  *fileTree   // the @stdlib modules
	allowed []*fileTree // the folders of Options.AllowRead, opened on first use
	closers []io.Closer

	current atomic.Pointer[starlark.Thread] // the thread running, for guarded ranges (guard.go)
}

// New returns an Interpreter with the memsh builtins, json, math and argv
// predeclared.
func New(opts Options) *Interpreter {
	if opts.MaxSteps == 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stdlib == nil {
		opts.Stdlib = stdlib.FS
	}
	pre := builtins.Predeclared()
	argv := make([]starlark.Value, len(opts.Args))
	for i, a := range opts.Args {
		argv[i] = starlark.String(a)
	}
	list := starlark.NewList(argv)
	list.Freeze()
	pre["argv"] = list

	in := &Interpreter{
		opts:        opts,
		predeclared: pre,
		sources:     map[string][]byte{},
		modules:     map[string]*module{},
		stdlib:      &fileTree{name: "@stdlib", files: opts.Stdlib, stdlib: true},
	}
	in.guardUniverse(pre)
	in.state = &host.State{
		Out:       opts.Stdout,
		Color:     opts.Color,
		Context:   context.Background(),
		ReadFile:  in.readFile,
		WriteFile: in.writeFile,
	}
	return in
}

// Predeclared returns the names every module sees: the builtins, json,
// math and argv. The dict is shared; do not modify it.
func (in *Interpreter) Predeclared() starlark.StringDict { return in.predeclared }

// Globals returns a fresh global environment for a REPL session: a copy of
// the predeclared names, which user chunks may rebind.
func (in *Interpreter) Globals() starlark.StringDict {
	g := make(starlark.StringDict, len(in.predeclared))
	for k, v := range in.predeclared {
		g[k] = v
	}
	return g
}

// State is the run's builtins.State.
func (in *Interpreter) State() *host.State { return in.state }

// Close releases the folder trees opened for the script.
func (in *Interpreter) Close() error {
	var errs []error
	for _, c := range in.closers {
		errs = append(errs, c.Close())
	}
	in.closers = nil
	return errors.Join(errs...)
}

// NewThread returns a thread set up for this interpreter: print to
// Stdout, load() through the module cache, the step limit, the State, and
// cancellation when ctx is done ("interrupted" when it was cancelled).
// Call the returned stop function when the thread is no longer used.
func (in *Interpreter) NewThread(ctx context.Context) (*starlark.Thread, func()) {
	t := &starlark.Thread{
		Name: "memsh",
		Print: func(_ *starlark.Thread, msg string) {
			fmt.Fprintln(in.state.Out, msg)
		},
		Load: in.load,
	}
	max := in.opts.MaxSteps
	t.SetMaxExecutionSteps(max)
	t.OnMaxSteps = func(t *starlark.Thread) { t.Cancel(stepsExceeded(max)) }
	in.state.Context = ctx
	in.state.Attach(t)
	in.current.Store(t)
	stop := context.AfterFunc(ctx, func() { t.Cancel(cancelReason(ctx)) })
	return t, func() {
		stop()
		in.current.CompareAndSwap(t, nil)
	}
}

// cancelReason words why ctx ended.
func cancelReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return "interrupted"
	}
	return cause.Error()
}

// RunFile reads and executes the script filename (a path as the user gave
// it), returning its globals. Errors are for FormatError. A script outside
// the root (the REPL's :load) may lie in a folder of Options.AllowRead.
func (in *Interpreter) RunFile(ctx context.Context, filename string) (starlark.StringDict, error) {
	m, err := in.mainModule(filename)
	if err != nil {
		return nil, err
	}
	// The size cap bounds this read; the run's context starts with the
	// script.
	src, err := readRegular(context.Background(), m.tree, m.rel, m.name, MaxScriptBytes, "scripts") // files.go
	if errors.Is(err, errNoFile) {
		return nil, fmt.Errorf("cannot read %s: no such file", m.name)
	}
	if err != nil {
		return nil, err
	}
	return in.execMain(ctx, m, src)
}

// ExecFile executes src as the main script called filename, which must
// lie under Root (for relative loads; nothing is read for the script
// itself).
func (in *Interpreter) ExecFile(ctx context.Context, filename string, src []byte) (starlark.StringDict, error) {
	m, err := in.mainModule(filename)
	if err != nil {
		return nil, err
	}
	return in.execMain(ctx, m, src)
}

// mainModule is the module of a main script: under the root, which it
// fixes on first use, or in a folder of Options.AllowRead.
func (in *Interpreter) mainModule(filename string) (*module, error) {
	name := cleanName(filename)
	if err := in.openRoot(path.Dir(name)); err != nil {
		return nil, err
	}
	rel, err := in.relToRoot(name)
	if err == nil {
		return &module{name: name, rel: rel, tree: in.root}, nil
	}
	if abs, aerr := filepath.Abs(filepath.FromSlash(name)); aerr == nil {
		if m, ok := in.treeModule(abs); ok { // load.go
			return m, nil
		}
	}
	return nil, err
}

// execMain runs the main script m on a new thread.
func (in *Interpreter) execMain(ctx context.Context, m *module, src []byte) (starlark.StringDict, error) {
	thread, stop := in.NewThread(ctx)
	defer stop()
	return in.execModule(thread, m, src)
}

// cleanName turns a user's path into the name used in positions.
func cleanName(p string) string { return path.Clean(filepath.ToSlash(p)) }

// openRoot fixes the folder tree on first use: Options.Root, else dir.
func (in *Interpreter) openRoot(dir string) error {
	if in.root != nil {
		return nil
	}
	root := in.opts.Root
	if root == "" {
		root = dir
	}
	if in.opts.Files != nil {
		in.root = &fileTree{name: cleanName(root), files: in.opts.Files}
		return nil
	}
	t, c, err := openTree(root) // files.go
	if err != nil {
		return err
	}
	in.root = t
	in.closers = append(in.closers, c)
	return nil
}

// openAllowed opens the folders of Options.AllowRead on first use.
func (in *Interpreter) openAllowed() error {
	if in.allowed != nil || len(in.opts.AllowRead) == 0 {
		return nil
	}
	in.allowed = []*fileTree{}
	for _, dir := range in.opts.AllowRead {
		t, c, err := openTree(dir)
		if err != nil {
			return err
		}
		in.allowed = append(in.allowed, t)
		in.closers = append(in.closers, c)
	}
	return nil
}

// relToRoot returns name relative to the root, or an error when name lies
// outside it.
func (in *Interpreter) relToRoot(name string) (string, error) {
	root := in.root.name
	var rel string
	switch {
	case root == ".":
		rel = name
	case name == root:
		rel = "."
	case len(name) > len(root) && name[:len(root)+1] == root+"/":
		rel = name[len(root)+1:]
	case root == "/":
		rel = name[1:]
	default:
		return "", fmt.Errorf("%s is outside the script's folder tree (%s)", name, in.root.desc())
	}
	if !fs.ValidPath(rel) || rel == "." {
		return "", fmt.Errorf("%s is outside the script's folder tree (%s)", name, in.root.desc())
	}
	return rel, nil
}

// unwrapPathError drops the operation and path of an *fs.PathError, which
// the caller words itself.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return errors.New("no such file")
		}
		return pe.Err
	}
	return err
}
