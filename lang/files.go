package lang

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// What a script may read. The main script's folder tree (Options.Root,
// else the folder of the main script; the working directory in the REPL)
// and the folders named with --allow-read (Options.AllowRead), each opened
// as an os.Root so that neither ".." nor a symlink leads out of it; only
// regular files (never a device, a FIFO, a socket or a folder), up to a
// size each reader names: MaxScriptBytes for scripts and modules, smaller
// caps for data files (hf_config's config.json).

// MaxScriptBytes is the largest script or module memsh reads: 16 MiB,
// hundreds of times the largest plan scripts.
const MaxScriptBytes = 16 << 20

// readChunk is how much readRegular reads between looks at its context.
const readChunk = 1 << 20

// fileTree is one folder tree scripts read from.
type fileTree struct {
	name   string // as in positions: "plans", "../configs"
	files  fs.FS
	root   *os.Root // the folder, for writes; nil for the stdlib and test file systems
	abs    string   // the folder's absolute path on disk; "" for the stdlib and test file systems
	stdlib bool     // the embedded @stdlib modules
}

// openTree opens the folder dir (a path as the user gave it) as an os.Root.
func openTree(dir string) (*fileTree, io.Closer, error) {
	name := cleanName(dir)
	abs, err := filepath.Abs(filepath.FromSlash(name))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open folder %s: %w", name, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open folder %s: %w", name, unwrapPathError(err))
	}
	return &fileTree{name: name, files: r.FS(), root: r, abs: abs}, r, nil
}

// join names the file rel of t as positions show it.
func (t *fileTree) join(rel string) string {
	if t.stdlib {
		return stdlibPrefix + rel
	}
	return path.Join(t.name, rel)
}

// desc names the tree for messages.
func (t *fileTree) desc() string {
	if t.name == "." {
		return "the current folder"
	}
	return t.name
}

// within returns p (an absolute OS path) relative to t, when it lies in t.
func (t *fileTree) within(p string) (string, bool) {
	if t.abs == "" {
		return "", false
	}
	rel, err := filepath.Rel(t.abs, p)
	if err != nil {
		return "", false
	}
	rel = filepath.ToSlash(rel)
	if !fs.ValidPath(rel) || rel == "." {
		return "", false
	}
	return rel, true
}

// readRegular reads the file rel of t, named name in messages: a regular
// file (symlinks inside the tree are followed) of at most limit bytes,
// what being the reader for the size message ("scripts", "config files").
// It looks at ctx between chunks, so a cancelled run stops a long read.
// The file is checked before it is opened, because opening a FIFO waits
// for a writer, and again after.
func readRegular(ctx context.Context, t *fileTree, rel, name string, limit int64, what string) ([]byte, error) {
	fi, err := fs.Stat(t.files, rel)
	if err != nil {
		return nil, readError(t, name, err)
	}
	if err := checkRegular(fi, name, limit, what); err != nil {
		return nil, err
	}
	f, err := t.files.Open(rel)
	if err != nil {
		return nil, readError(t, name, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, readError(t, name, err)
	}
	if err := checkRegular(fi, name, limit, what); err != nil {
		return nil, err
	}
	var data []byte
	r := io.LimitReader(f, limit+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s stopped: %v", name, context.Cause(ctx))
		}
		buf := make([]byte, readChunk)
		n, err := io.ReadFull(r, buf)
		data = append(data, buf[:n]...)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, readError(t, name, err)
		}
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(name, int64(len(data)), limit, what)
	}
	return data, nil
}

// checkRegular refuses what is not a regular file, or is larger than limit.
func checkRegular(fi fs.FileInfo, name string, limit int64, what string) error {
	m := fi.Mode()
	if !m.IsRegular() {
		return fmt.Errorf("%s is %s, not a regular file: memsh reads only regular files", name, FileKind(m))
	}
	if fi.Size() > limit {
		return tooLarge(name, fi.Size(), limit, what)
	}
	return nil
}

func tooLarge(name string, size, limit int64, what string) error {
	more := units.FormatBytes(size)
	if size > limit && more == units.FormatBytes(limit) {
		more = "over " + more
	}
	return fmt.Errorf("%s is %s: memsh reads %s up to %s", name, more, what, units.FormatBytes(limit))
}

// FileKind words a file mode that is not a regular file: "a named pipe
// (FIFO)", "a character device", "a folder".
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a special file"
}

// errNoFile starts the error for a file that is not there.
var errNoFile = errors.New("no such file")

// readError words an error of reading name from t.
func readError(t *fileTree, name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w %s", errNoFile, name)
	case strings.Contains(err.Error(), "escapes"): // os.Root: ".." or a symlink out of the tree
		return fmt.Errorf("%s leaves the script's folder tree (%s)", name, t.desc())
	}
	return fmt.Errorf("cannot read %s: %w", name, unwrapPathError(err))
}
