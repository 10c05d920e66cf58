package main

// cmdRun runs a script: memsh run FILE.star [ARGS...].
func (e *env) cmdRun(operands []string) error {
	if len(operands) == 0 {
		return usagef("run needs a script: memsh run FILE.star [ARGS...]")
	}
	return e.runScript(operands[0], operands[1:]) // --json, --plot, main()
}
