package lang

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

var undefinedRE = regexp.MustCompile(`^undefined: ([A-Za-z_][A-Za-z0-9_]*)`)

// hintFor returns advice for common slips named by msg, or "".
func hintFor(msg string, stdlib fs.FS) string {
	if m := undefinedRE.FindStringSubmatch(msg); m != nil {
		switch name := m[1]; name {
		case "true":
			return "Starlark spells the booleans True and False: use True"
		case "false":
			return "Starlark spells the booleans True and False: use False"
		case "null", "nil", "none", "NULL":
			return "Starlark's null value is None"
		default:
			if h := pythonNameHint(name); h != "" {
				return h
			}
			if stdlib == nil {
				return ""
			}
			exports, _ := StdlibExports(stdlib)
			for _, e := range exports {
				if e.Name == name {
					return fmt.Sprintf("%s is in the stdlib: add load(%q, %q) at the top of the file", name, e.Module, name)
				}
			}
		}
		return ""
	}
	if h := pythonSyntaxHint(msg); h != "" {
		return h
	}
	switch {
	case strings.HasPrefix(msg, "cannot write ") && (strings.Contains(msg, "outside the script's folder tree") ||
		strings.Contains(msg, "name a file relative to the script") || strings.Contains(msg, "a link leads out of the script's folder tree")):
		return "scripts write only inside their own folder (--allow-read lets them read a folder, not write there): " +
			"name a file there, or ask the command line for one anywhere (memsh run --snapshot FILE or --trace FILE, memsh plot -o FILE)"
	case strings.Contains(msg, "does not support while loops"):
		return "memsh has no while loops, so every script ends: loop over range(n) instead"
	case strings.Contains(msg, "called recursively"):
		return "memsh does not allow recursion: rewrite it as a loop"
	case strings.Contains(msg, "leaves the script's folder tree") || strings.Contains(msg, "is outside the script's folder tree") ||
		strings.Contains(msg, "not allowed: name files relative to the loading file"):
		return "scripts read only the files under their own folder; memsh --allow-read DIR lets them read DIR too"
	}
	return ""
}
