package lang

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"
)

// stdlibPrefix starts the names of embedded stdlib modules.
const stdlibPrefix = "@stdlib//"

// module is one entry of the load cache.
type module struct {
	name    string    // as in positions: "examples/lib.star", "@stdlib//units.star"
	rel     string    // path inside its tree
	tree    *fileTree // the root folder, a folder allowed with --allow-read, or the stdlib
	done    bool
	globals starlark.StringDict
	err     error
}

// execModule runs m's source on thread, caching the outcome.
func (in *Interpreter) execModule(thread *starlark.Thread, m *module, src []byte) (globals starlark.StringDict, err error) {
	in.AddSource(m.name, src)
	in.mu.Lock()
	in.modules[m.name] = m
	in.loading = append(in.loading, m.name)
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		in.loading = in.loading[:len(in.loading)-1]
		m.done, m.globals, m.err = true, globals, err
		in.mu.Unlock()
	}()
	defer recoverPanic(m.name, &err) // guard.go

	return starlark.ExecFileOptions(FileOptions(), thread, m.name, src, in.predeclared)
}

// load implements thread.Load: module is resolved against the file that
// executes the load statement.
func (in *Interpreter) load(thread *starlark.Thread, module string) (starlark.StringDict, error) {
	from := ""
	if thread.CallStackDepth() > 0 {
		from = thread.CallFrame(0).Pos.Filename()
	}
	m, err := in.resolve(from, module)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	cached, ok := in.modules[m.name]
	var cycle []string
	if ok && !cached.done {
		for i, n := range in.loading {
			if n == m.name {
				cycle = append(append(cycle, in.loading[i:]...), m.name)
				break
			}
		}
	}
	in.mu.Unlock()
	if cycle != nil {
		return nil, fmt.Errorf("cycle in load graph: %s", strings.Join(cycle, " -> "))
	}
	if ok {
		return cached.globals, cached.err
	}
	src, err := in.read(m)
	if err != nil {
		return nil, err
	}
	return in.execModule(thread, m, src)
}

// resolve names the module that a load (or file read) of target from the
// file from refers to. from is a file name as in positions; a name that is
// no module (a REPL chunk) counts as a file at the root.
func (in *Interpreter) resolve(from, target string) (*module, error) {
	if in.root == nil {
		if err := in.openRoot("."); err != nil {
			return nil, err
		}
	}
	if target == "" {
		return nil, errors.New("empty module name")
	}
	if strings.HasPrefix(target, "@") {
		pkg, p, ok := strings.Cut(target[1:], "//")
		if !ok || pkg != "stdlib" {
			name, _, _ := strings.Cut(target, "//")
			return nil, fmt.Errorf("unknown package %q (known: @stdlib)", name)
		}
		return in.stdlibModule(target, p)
	}
	if strings.HasPrefix(target, "//") {
		return in.localModule(in.root, target[2:])
	}
	if path.IsAbs(target) || filepath.IsAbs(target) {
		if m, ok := in.treeModule(filepath.Clean(filepath.FromSlash(target))); ok {
			return m, nil
		}
		return nil, fmt.Errorf("absolute path %q not allowed: name files relative to the loading file", target)
	}
	in.mu.Lock()
	caller := in.modules[from]
	in.mu.Unlock()
	t, dir := in.root, "."
	if caller != nil {
		t, dir = caller.tree, path.Dir(caller.rel)
		if t.stdlib {
			return in.stdlibModule(target, path.Join(dir, target))
		}
	}
	rel := path.Clean(path.Join(dir, target))
	if !fs.ValidPath(rel) && t.abs != "" {
		// Out of the caller's tree: into the script's, or a folder allowed
		// with --allow-read?
		if m, ok := in.treeModule(filepath.Join(t.abs, filepath.FromSlash(rel))); ok {
			return m, nil
		}
	}
	return in.localModule(t, rel)
}

func (in *Interpreter) stdlibModule(target, p string) (*module, error) {
	rel := path.Clean(p)
	if !fs.ValidPath(rel) || rel == "." {
		return nil, fmt.Errorf("%q is not a file of @stdlib", target)
	}
	return &module{name: in.stdlib.join(rel), rel: rel, tree: in.stdlib}, nil
}

func (in *Interpreter) localModule(t *fileTree, p string) (*module, error) {
	rel := path.Clean(p)
	if rel == "." { // it leaves nothing: hf_config(".") read "path leaves the script's folder tree"
		return nil, fmt.Errorf("path names a folder (%s), not a file", t.desc())
	}
	if !fs.ValidPath(rel) {
		return nil, fmt.Errorf("path leaves the script's folder tree (%s)", t.desc())
	}
	return &module{name: t.join(rel), rel: rel, tree: t}, nil
}

// treeModule finds the folder tree scripts may read, the script's or one
// allowed with --allow-read, that holds the absolute path p.
func (in *Interpreter) treeModule(p string) (*module, bool) {
	if err := in.openAllowed(); err != nil {
		return nil, false
	}
	for _, t := range append([]*fileTree{in.root}, in.allowed...) {
		if rel, ok := t.within(p); ok {
			return &module{name: t.join(rel), rel: rel, tree: t}, true
		}
	}
	return nil, false
}

// read returns the text of m, a script or module.
func (in *Interpreter) read(m *module) ([]byte, error) {
	return in.readLimited(m, MaxScriptBytes, "scripts")
}

// readLimited returns the contents of m, a regular file of at most limit
// bytes; what names the kind of file for the size message.
func (in *Interpreter) readLimited(m *module, limit int64, what string) ([]byte, error) {
	src, err := readRegular(in.state.Context, m.tree, m.rel, m.name, limit, what) // files.go
	if err != nil && m.tree.stdlib && errors.Is(err, errNoFile) {
		return nil, fmt.Errorf("no module %s (stdlib has: %s)", m.name, strings.Join(in.stdlibNames(), ", "))
	}
	return src, err
}

// stdlibNames lists the top-level stdlib modules.
func (in *Interpreter) stdlibNames() []string {
	var names []string
	entries, _ := fs.ReadDir(in.opts.Stdlib, ".")
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".star") {
			names = append(names, stdlibPrefix+e.Name())
		}
	}
	return names
}

// readFile implements builtins.State.ReadFile.
func (in *Interpreter) readFile(from, name string, limit int64, what string) ([]byte, error) {
	m, err := in.resolve(from, name)
	if err != nil {
		return nil, err
	}
	return in.readLimited(m, limit, what)
}
