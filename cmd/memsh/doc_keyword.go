package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/memsh/memsh/builtins/host"
)

// keywordDoc documents name when it is no builtin but a keyword of some
// (memsh doc fsdp_sync_each_batch): each builtin that takes it, and the
// keyword's own line of that builtin's doc where it has one. It reports
// whether name is a keyword of any.
func keywordDoc(w io.Writer, name string, bs []host.Builtin) bool {
	found := false
	for _, b := range bs {
		if !strings.Contains(b.Sig, "("+name+"=") && !strings.Contains(b.Sig, ", "+name+"=") {
			continue
		}
		if found {
			fmt.Fprintln(w)
		}
		found = true
		fmt.Fprintf(w, "%s is a keyword of %s() (memsh doc %s has all of it)\n", name, b.Name, b.Name)
		for _, line := range strings.Split(b.Doc, "\n") {
			if strings.HasPrefix(line, "- "+name+":") {
				fmt.Fprintf(w, "\n%s", host.WrapDoc(strings.TrimPrefix(line, "- "), 78))
			}
		}
	}
	return found
}
