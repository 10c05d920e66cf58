package main

import "strings"

// cmdRun runs a script: memsh run FILE.star [ARGS...].
func (e *env) cmdRun(operands []string) error {
	if len(operands) == 0 {
		return usagef("run needs a script: memsh run FILE.star [ARGS...]")
	}
	if p := e.out.plot; p != "" && !strings.HasSuffix(strings.ToLower(p), ".svg") {
		return usagef("run --plot writes an SVG: %q does not end in .svg", p)
	}
	return e.runScript(operands[0], operands[1:]) // --json, --plot, main()
}
