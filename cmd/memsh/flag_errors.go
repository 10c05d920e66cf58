package main

import (
	"flag"
	"strings"

	"github.com/memsh/memsh/builtins/host"
)

// flagError is the usage error of fs.Parse's err over args: a flag fs
// does not define is named as the user typed it ("--gpus", where the flag
// package writes "-gpus"), with the flags it is near.
func flagError(fs *flag.FlagSet, args []string, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return usagef("%v", err)
	}
	typed := "-" + name
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			typed = "--" + name
			break
		}
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	near := nearNames(name, names)
	if len(near) == 0 {
		if n := host.DidYouMean(name, names); n != "" { // a misspelling: --colour
			near = []string{strings.Trim(strings.TrimPrefix(n, "did you mean "), `"?`)}
		}
	}
	if len(near) > 0 {
		return usagef("unknown flag %s (did you mean --%s?)", typed, strings.Join(near, ", --"))
	}
	return usagef("unknown flag %s (memsh help lists the flags)", typed)
}
