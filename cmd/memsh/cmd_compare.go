package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/sim/units"
	"github.com/memsh/memsh/snapshot"
	"go.starlark.net/starlark"
)

// maxSnapshotBytes is the largest snapshot memsh compare reads: a
// real step's snapshot with its stacks runs to a few hundred MiB, and
// decoding holds several times that.
const maxSnapshotBytes = 1 << 30

// cmdCompare is memsh compare SNAPSHOT.pickle SCRIPT.star [ARGS...]
// [--json]: a measured memory snapshot (torch.cuda.memory._dump_snapshot,
// tools/record_snapshot.py) lined up against the step the script
// simulates (the last report it emitted, else the last it simulated),
// traced as run --snapshot writes it. The script's own output goes to
// stderr; stdout holds the comparison, as text or one JSON object.
func (e *env) cmdCompare(operands []string) error {
	if len(operands) < 2 {
		return usagef("compare needs a snapshot and a script: memsh compare SNAPSHOT.pickle SCRIPT.star [ARGS...]")
	}
	data, err := readSnapshotFile(operands[0])
	if err != nil {
		return err
	}
	measured, err := snapshot.Read(data)
	if err != nil {
		return fmt.Errorf("%s: %w", operands[0], err)
	}
	sr := scriptRun{
		file: operands[1], args: operands[2:],
		out: e.stderr, color: useColor(e.color, e.stderr, e.getenv),
		errOut: e.stderr, errColor: useColor(e.color, e.stderr, e.getenv),
		emit: func(*starlark.Thread, host.Emitted) error { return nil }, // kept in the result, not printed
	}
	res, err := e.execScript(e.ctx, sr)
	if err != nil {
		return err
	}
	rep, err := reportToWrite(res)
	if err != nil {
		return err
	}
	traced, err := rep.WithTrace()
	if err != nil {
		return err
	}
	predicted, err := snapshot.FromReport(traced)
	if err != nil {
		return err
	}
	c := snapshot.Compare(measured, predicted)
	if e.out.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	}
	return c.Render(e.stdout)
}

// readSnapshotFile reads the snapshot named on the command line: a
// regular file (a named pipe would wait for a writer) of at most
// maxSnapshotBytes.
func readSnapshotFile(name string) ([]byte, error) {
	check := func(fi os.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is %s, not a regular file: memsh compare reads a snapshot file", name, lang.FileKind(fi.Mode()))
		}
		if fi.Size() > maxSnapshotBytes {
			return fmt.Errorf("%s is %s: memsh compare reads snapshots up to %s", name, units.FormatBytes(fi.Size()), units.FormatBytes(maxSnapshotBytes))
		}
		return nil
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read the snapshot %s: %v", name, unwrapPath(err))
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read the snapshot %s: %v", name, unwrapPath(err))
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("cannot read the snapshot %s: %v", name, unwrapPath(err))
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSnapshotBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the snapshot %s: %v", name, unwrapPath(err))
	}
	if len(data) > maxSnapshotBytes {
		return nil, fmt.Errorf("%s grew past %s while memsh read it", name, units.FormatBytes(maxSnapshotBytes))
	}
	return data, nil
}
