package main

import (
	"io"
	"os"
)

// useColor decides whether output to w is coloured: --color=always and
// never win; auto colours a terminal unless NO_COLOR is set (to anything
// non-empty, per no-color.org) or TERM is dumb.
func useColor(mode string, w io.Writer, getenv func(string) string) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
