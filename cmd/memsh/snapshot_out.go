package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/perfetto"
	"github.com/memsh/memsh/snapshot"
)

// errNothingToSnapshot says the script gave no report.
var errNothingToSnapshot = errors.New("no report to write: the script emitted none and simulated none (emit(simulate(plan)) chooses which)")

// reportToWrite is the report run --snapshot and --trace write: the last
// the script emitted, else the last it simulated.
func reportToWrite(res *scriptResult) (host.Simulation, error) {
	var rep host.Simulation
	for _, em := range res.emitted {
		if s, ok := em.Value.(host.Simulation); ok {
			rep = s
		}
	}
	if rep == nil {
		rep = res.last
	}
	if rep == nil {
		return nil, errNothingToSnapshot
	}
	return rep, nil
}

// writeSnapshot is run --snapshot FILE: the report replayed with its
// device trace and written as a PyTorch memory snapshot
// (pytorch.org/memory_viz opens it). The file is written whole or not at
// all.
func writeSnapshot(name string, res *scriptResult) error {
	rep, err := reportToWrite(res)
	if err != nil {
		return err
	}
	traced, err := rep.WithTrace()
	if err != nil {
		return err
	}
	snap, err := snapshot.FromReport(traced)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := snap.Write(&b); err != nil {
		return fmt.Errorf("cannot write the snapshot: %w", err)
	}
	return writeAtomic(name, b.Bytes())
}

// writeTrace is run --trace FILE: the report's step time as a Perfetto
// (Chrome trace-event) JSON file, which ui.perfetto.dev opens.
func writeTrace(name string, res *scriptResult) error {
	rep, err := reportToWrite(res)
	if err != nil {
		return err
	}
	tr, err := perfetto.FromReport(rep.SimReport(), rep.Title())
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := tr.Write(&b); err != nil {
		return fmt.Errorf("cannot write the trace: %w", err)
	}
	return writeAtomic(name, b.Bytes())
}

// writeAtomic writes data to a temporary file beside name and renames it
// over name, so a reader never sees half a file.
func writeAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	return nil
}
