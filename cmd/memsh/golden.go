package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/sim/units"
)

// maxGoldenBytes is the largest golden file memsh test reads: 64 MiB,
// thousands of times the largest goldens of the examples.
const maxGoldenBytes = 64 << 20

// golden is the golden file of one test script, x.golden beside x.star.
// It is read and written only inside the script's folder (an os.Root),
// only as a regular file (never through a symlink, never a device or a
// FIFO), and written atomically: a temporary file in the same folder,
// renamed over the golden.
type golden struct {
	root *os.Root
	base string // the file name inside root
	path string // as messages name it
}

// openGolden opens the folder of path, the golden of a test script.
func openGolden(path string) (*golden, error) {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("cannot open the folder of %s: %v", path, unwrapPath(err))
	}
	return &golden{root: root, base: filepath.Base(path), path: path}, nil
}

func (g *golden) Close() error { return g.root.Close() }

// stat returns the golden's file info, nil when there is none, or an error
// when it is anything but a regular file.
func (g *golden) stat() (fs.FileInfo, error) {
	fi, err := g.root.Lstat(g.base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", g.path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s: goldens must be regular files (memsh test neither reads nor writes through it)", g.path, lang.FileKind(fi.Mode()))
	}
	return fi, nil
}

// read returns the golden's text; ok is false when there is no golden.
func (g *golden) read() (text []byte, ok bool, err error) {
	fi, err := g.stat()
	if fi == nil || err != nil {
		return nil, false, err
	}
	if fi.Size() > maxGoldenBytes {
		return nil, false, g.tooLarge(fi.Size())
	}
	f, err := g.root.OpenFile(g.base, os.O_RDONLY, 0)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read %s: %v", g.path, unwrapPath(err))
	}
	defer f.Close()
	// The file opened must be the regular file just looked at, not one
	// put in its place since.
	if fi2, err := f.Stat(); err != nil || !os.SameFile(fi, fi2) {
		return nil, false, fmt.Errorf("cannot read %s: it changed while being opened", g.path)
	}
	text, err = io.ReadAll(io.LimitReader(f, maxGoldenBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("cannot read %s: %v", g.path, unwrapPath(err))
	}
	if len(text) > maxGoldenBytes {
		return nil, false, g.tooLarge(int64(len(text)))
	}
	return text, true, nil
}

func (g *golden) tooLarge(size int64) error {
	return fmt.Errorf("%s is %s: memsh test reads goldens up to %s", g.path, units.FormatBytes(size), units.FormatBytes(maxGoldenBytes))
}

// write replaces the golden with text, atomically: a new file in the same
// folder, renamed over the old one, keeping its permissions.
func (g *golden) write(text []byte) (err error) {
	fi, err := g.stat()
	if err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if fi != nil {
		perm = fi.Mode().Perm()
	}
	var suffix [8]byte
	rand.Read(suffix[:])
	tmp := "." + g.base + ".tmp-" + hex.EncodeToString(suffix[:])
	f, err := g.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", g.path, unwrapPath(err))
	}
	defer func() {
		if err != nil {
			g.root.Remove(tmp)
		}
	}()
	_, err = f.Write(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = g.root.Rename(tmp, g.base)
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", g.path, unwrapPath(err))
	}
	return nil
}
