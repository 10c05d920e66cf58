package repl

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// History is the list of statements entered at the REPL, one entry per
// complete statement (a whole def is one entry), kept in a file across
// sessions. In the file each entry is one line, with a newline written as
// \n and a backslash as \\.
type History struct {
	path    string // "" keeps the history in memory only
	entries []string
}

// HistoryPath returns the history file: $MEMSH_HISTFILE, else
// $XDG_STATE_HOME/memsh/history, else ~/.local/state/memsh/history (the
// XDG default). It returns "" when none can be named (no HOME).
func HistoryPath(getenv func(string) string) string {
	if p := getenv("MEMSH_HISTFILE"); p != "" {
		return p
	}
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "memsh", "history")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "memsh", "history")
	}
	return ""
}

// OpenHistory reads the history file at path (a missing file is an empty
// history). With path "" the history lives in memory only.
func OpenHistory(path string) (*History, error) {
	h := &History{path: path}
	if path == "" {
		return h, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("cannot read history: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			h.entries = append(h.entries, decodeEntry(line))
		}
	}
	if err := sc.Err(); err != nil {
		return h, fmt.Errorf("cannot read history %s: %w", path, err)
	}
	return h, nil
}

// Entries returns the entries, oldest first. The slice is shared; do not
// modify it.
func (h *History) Entries() []string { return h.entries }

// Add appends entry, unless it is blank or repeats the last entry, and
// writes it to the file (creating the file and its folder).
func (h *History) Add(entry string) error {
	entry = strings.TrimRight(entry, " \t\n")
	if strings.TrimSpace(entry) == "" {
		return nil
	}
	if n := len(h.entries); n > 0 && h.entries[n-1] == entry {
		return nil
	}
	h.entries = append(h.entries, entry)
	if h.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return fmt.Errorf("cannot write history: %w", err)
	}
	f, err := os.OpenFile(h.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write history: %w", err)
	}
	_, err = f.WriteString(encodeEntry(entry) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot write history: %w", err)
	}
	return nil
}

func encodeEntry(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func decodeEntry(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
