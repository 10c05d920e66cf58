package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/memsh/memsh/importers"
	"github.com/memsh/memsh/jsondoc"
)

// jsonVerdict is what memsh check --json, fit --json and run --json owe
// their user on every exit: one JSON document on stdout, the last line,
// with the exit code in it (docs/json.md). check's verdict is written by
// runCheck when a step was replayed; on any other exit, and on fit's and
// run's errors, exitCode writes it from the error (writeJSONError).
type jsonVerdict struct {
	config  string            // check's or fit's config operand, once read
	res     *importers.Result // check's import, once it succeeded
	written bool              // check's verdict is on stdout
	// scriptErr is a failed script's error as execScript printed it,
	// without colour: the plan script's (check) or fit.star's.
	scriptErr string
}

// jsonCommands are the commands that write a last document with their
// verdict or error under --json: run's and fit's "error" document when
// they fail, check's verdict on every exit.
var jsonCommands = []string{"check", "fit", "run"}

// jsonVerdictCommand is the command of args that owes a --json verdict,
// or "". The flags may not have been parsed when a flag was wrong
// (memsh check --bogus --json x), so --json is also looked for as typed.
func (e *env) jsonVerdictCommand(args []string) string {
	cmd := e.command
	if cmd == "" { // the common flags before it were wrong
		if i := slices.IndexFunc(args, func(a string) bool { return !strings.HasPrefix(a, "-") }); i >= 0 {
			cmd = args[i]
		}
	}
	if !slices.Contains(jsonCommands, cmd) {
		return ""
	}
	if e.out.json {
		return cmd
	}
	for _, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "json" {
			if on, err := strconv.ParseBool(value); !hasValue || err == nil && on {
				return cmd
			}
		}
	}
	return ""
}

// writeJSONError writes the last document of cmd (check, fit or run)
// after err, which exits with code: check's verdict with the error in it,
// fit's and run's "error" document.
func (e *env) writeJSONError(cmd string, err error, code int) {
	je := jsonErrorOf(e.ctx, err, e.json.scriptErr)
	je.Exit = code
	doc := jsondoc.Doc{Version: jsondoc.Version, Kind: jsondoc.KindError, At: e.json.config, Error: je}
	if cmd == "check" {
		je.Exit = 0 // check.exit holds it
		c := &jsondoc.Check{Config: e.json.config, NotUnderstood: []string{}, NotModelled: []string{},
			HeadroomAsked: e.out.gate.headroom.frac, Exit: code, Error: je}
		if r := e.json.res; r != nil {
			c.Trainer, c.NotUnderstood, c.DidYouMean, c.NotModelled, c.ModelFrom = r.Trainer, nonNil(r.Unknown), r.DidYouMean, nonNil(r.NotModelled), r.ModelFrom
		}
		doc.Kind, doc.Error, doc.Check = jsondoc.KindCheck, nil, c
	}
	line, _ := json.Marshal(doc) // strings, numbers and a map of strings: it cannot fail
	e.stdout.Write(append(line, '\n'))
}

// jsonErrorOf is err as its document says it: the message and hint
// printed on stderr, where it is when that is known; the caller sets
// its exit code.
func jsonErrorOf(ctx context.Context, err error, scriptErr string) *jsondoc.Error {
	var (
		ue *usageError
		ie *importers.Error
	)
	switch {
	case ctx.Err() != nil:
		return &jsondoc.Error{Message: "interrupted"}
	case errors.As(err, &ue):
		return &jsondoc.Error{Message: ue.msg, Hint: "memsh help lists the commands and flags"}
	case errors.As(err, &ie):
		at := ie.File
		if ie.Line > 0 {
			at += ":" + strconv.Itoa(ie.Line)
		}
		return &jsondoc.Error{Message: ie.Error(), Hint: ie.Hint, At: at}
	case errors.Is(err, errPrinted) && scriptErr != "":
		return parseScriptError(scriptErr)
	default:
		return &jsondoc.Error{Message: err.Error()}
	}
}

// parseScriptError reads lang.FormatError's text: "[POS: ]error: MSG",
// then the excerpt and traceback lines, "  hint: HINT".
func parseScriptError(text string) *jsondoc.Error {
	var je jsondoc.Error
	for i, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if i == 0 {
			at, msg, ok := strings.Cut(l, "error: ")
			if !ok {
				msg = l
			}
			je.Message, je.At = msg, strings.TrimSuffix(strings.TrimSpace(at), ":")
		} else if h, ok := strings.CutPrefix(l, "  hint: "); ok {
			je.Hint = h
		}
	}
	return &je
}
