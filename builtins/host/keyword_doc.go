package host

import (
	"fmt"
	"io"
	"strings"
)

// KeywordDoc documents name when it is no builtin but a keyword of some
// (memsh doc fsdp_sync_each_batch) or a field of the value one returns
// (memsh doc device_used, a field of simulate()'s report): each builtin
// that takes it, and the keyword's own line of that builtin's doc where it
// has one, then each builtin whose value has it, with the field's line. It
// reports whether name is either. docCmd is how the reader documents a
// builtin ("memsh doc ", the REPL's ":help ").
func KeywordDoc(w io.Writer, name string, bs []Builtin, docCmd string) bool {
	found := false
	for _, b := range bs {
		if !strings.Contains(b.Sig, "("+name+"=") && !strings.Contains(b.Sig, ", "+name+"=") {
			continue
		}
		if found {
			fmt.Fprintln(w)
		}
		found = true
		fmt.Fprintf(w, "%s is a keyword of %s() (%s%s has all of it)\n", name, b.Name, docCmd, b.Name)
		for _, line := range strings.Split(b.Doc, "\n") {
			if strings.HasPrefix(line, "- "+name+":") {
				fmt.Fprintf(w, "\n%s", WrapDoc(strings.TrimPrefix(line, "- "), 78))
			}
		}
	}
	for _, b := range bs {
		line, ok := fieldLine(b.Doc, name)
		if !ok {
			continue
		}
		if found {
			fmt.Fprintln(w)
		}
		found = true
		fmt.Fprintf(w, "%s is a field of what %s() returns (%s%s has all of them)\n", name, b.Name, docCmd, b.Name)
		fmt.Fprintf(w, "\n%s", strings.TrimSuffix(WrapDoc(line, 78), "\n")+"\n")
	}
	return found
}

// FieldNames lists the fields of the builtins' Fields: lists, for the
// did-you-mean of memsh doc.
func FieldNames(bs []Builtin) []string {
	var out []string
	for _, b := range bs {
		for _, e := range fieldEntries(b.Doc) {
			if name, _, ok := strings.Cut(e, ":"); ok && name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

// fieldLine is name's line ("name: what it is") in the Fields: list of a
// builtin's doc (simulate()'s report fields).
func fieldLine(doc, name string) (string, bool) {
	for _, e := range fieldEntries(doc) {
		if rest, ok := strings.CutPrefix(e, name+":"); ok {
			return name + ":" + rest, true
		}
	}
	return "", false
}

// fieldEntries are the lines of a builtin doc's Fields: list, each
// without its "- ", up to the first line that is not one.
func fieldEntries(doc string) []string {
	_, fields, ok := strings.Cut(doc, "\nFields:\n")
	if !ok {
		return nil
	}
	var out []string
	for _, line := range strings.Split(fields, "\n") {
		if line == "" {
			continue
		}
		rest, ok := strings.CutPrefix(line, "- ")
		if !ok {
			break // the list has ended
		}
		out = append(out, rest)
	}
	return out
}
