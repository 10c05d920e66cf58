package main

import (
	"github.com/memsh/memsh/lang"
)

// cmdRun runs a script: memsh run FILE.star [ARGS...].
func (e *env) cmdRun(operands []string) error {
	if len(operands) == 0 {
		return usagef("run needs a script: memsh run FILE.star [ARGS...]")
	}
	file, args := operands[0], operands[1:]
	in := lang.New(lang.Options{
		MaxSteps: e.maxSteps,
		Stdout:   e.stdout,
		Color:    useColor(e.color, e.stdout, e.getenv),
		Args:     args,
	})
	defer in.Close()
	if _, err := in.RunFile(e.ctx, file); err != nil {
		in.FormatError(e.stderr, err, useColor(e.color, e.stderr, e.getenv))
		return errPrinted
	}
	return nil
}
