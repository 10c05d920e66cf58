package lang

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// What a script may write (r.save_snapshot, r.save_trace): a regular file
// in the main script's own folder tree, named relative to the calling
// file, never in the stdlib or a folder allowed only for reading, never
// through ".." or a symlink out (the tree is an os.Root), never over
// something that is not a regular file, and whole or not at all (a
// temporary file renamed over the name).

// MaxWriteBytes is the most a script may write to one file.
const MaxWriteBytes = 1 << 30

// writeFile writes data to name, relative to the file from.
func (in *Interpreter) writeFile(from, name string, data []byte) error {
	if in.root == nil {
		if err := in.openRoot("."); err != nil {
			return err
		}
	}
	if int64(len(data)) > MaxWriteBytes {
		return fmt.Errorf("cannot write %s: %s is more than memsh writes (%s)", name, units.FormatBytes(int64(len(data))), units.FormatBytes(MaxWriteBytes))
	}
	if name == "" || path.IsAbs(name) || strings.HasPrefix(name, "@") || strings.Contains(name, "\\") {
		return fmt.Errorf("cannot write %q: name a file relative to the script, inside its folder", name)
	}
	in.mu.Lock()
	caller := in.modules[from]
	in.mu.Unlock()
	t, dir := in.root, "."
	if caller != nil {
		if caller.tree != in.root {
			return fmt.Errorf("cannot write %s: %s is not in the script's folder tree (only the script's own files write)", name, caller.name)
		}
		dir = path.Dir(caller.rel)
	}
	rel := path.Clean(path.Join(dir, name))
	if rel == "." {
		return fmt.Errorf("cannot write %s: it is a folder (%s), not a file", name, t.desc())
	}
	if !fs.ValidPath(rel) {
		return fmt.Errorf("cannot write %s: it is outside the script's folder tree (%s)", name, t.desc())
	}
	if t.root == nil {
		return fmt.Errorf("cannot write %s: file writing is not available here", name)
	}
	shown := t.join(rel)
	if fi, err := t.root.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("cannot write %s: it is %s, not a regular file", shown, FileKind(fi.Mode()))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return writeError(shown, err)
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+"."+hex.EncodeToString(suffix[:])+".tmp")
	f, err := t.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot write %s: its folder %s does not exist (memsh creates no folders)", shown, t.join(path.Dir(rel)))
	}
	if err != nil {
		return writeError(shown, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = t.root.Rename(tmp, rel)
	}
	if werr != nil {
		t.root.Remove(tmp)
		return writeError(shown, werr)
	}
	return nil
}

// writeError words an error of the write's os.Root: a symlink out of the
// tree is os.Root's "path escapes from parent", which names neither the
// link nor the tree.
func writeError(shown string, err error) error {
	err = unwrapPathError(err)
	if err.Error() == "path escapes from parent" {
		return fmt.Errorf("cannot write %s: a link leads out of the script's folder tree", shown)
	}
	return fmt.Errorf("cannot write %s: %v", shown, err)
}
