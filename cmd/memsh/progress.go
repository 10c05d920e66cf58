package main

import (
	"io"
	"os"
)

// progressTo is where long sweeps and searches draw their progress bar:
// w when it is a terminal, else nowhere (nil), so that pipes, files and
// goldens see none.
func progressTo(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return w
}
