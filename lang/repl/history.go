package repl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memsh/memsh/lang"
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

// Limits of the history file: an entry longer than MaxHistoryEntry bytes
// (encoded) is kept for the session but not written, and reading keeps the
// last MaxHistoryEntries entries of the file's last maxHistoryRead bytes,
// so a huge or damaged file slows no start.
const (
	MaxHistoryEntry   = 16 << 10
	MaxHistoryEntries = 10000
	maxHistoryRead    = 4 << 20
)

// OpenHistory reads the history file at path (a missing file is an empty
// history). With path "" the history lives in memory only. A path that is
// not a regular file (a FIFO, a device, a folder) is an error, and nothing
// is opened: opening a FIFO would wait for a writer. Lines of the file too
// long to be entries are skipped, not fatal.
func OpenHistory(path string) (*History, error) {
	h := &History{path: path}
	if path == "" {
		return h, nil
	}
	size, err := historyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		h.path = ""
		return h, err
	}
	f, err := os.Open(path)
	if err != nil {
		h.path = ""
		return h, fmt.Errorf("cannot read history: %w", err)
	}
	defer f.Close()
	skip := max(size-maxHistoryRead, 0)
	if _, err := f.Seek(skip, io.SeekStart); err != nil {
		h.path = ""
		return h, fmt.Errorf("cannot read history %s: %w", path, err)
	}
	r := bufio.NewReader(io.LimitReader(f, maxHistoryRead))
	for first := true; ; first = false {
		line, long, err := readHistoryLine(r)
		// Past a skipped start the first line is a part of one.
		if line != "" && !long && !(first && skip > 0) {
			h.entries = append(h.entries, decodeEntry(line))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			h.path = ""
			return h, fmt.Errorf("cannot read history %s: %w", path, err)
		}
	}
	if n := len(h.entries); n > MaxHistoryEntries {
		h.entries = h.entries[n-MaxHistoryEntries:]
	}
	return h, nil
}

// historyFile returns the size of the history file at path, or an error
// when it is not a regular file.
func historyFile(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("history file %s is %s, not a regular file", path, lang.FileKind(fi.Mode()))
	}
	return fi.Size(), nil
}

// readHistoryLine reads one line of the history file; long says it was
// longer than MaxHistoryEntry (and was dropped).
func readHistoryLine(r *bufio.Reader) (line string, long bool, err error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if len(b) <= MaxHistoryEntry {
			b = append(b, chunk...)
		}
		if err != nil || !isPrefix {
			return string(b), len(b) > MaxHistoryEntry, err
		}
	}
}

// Entries returns the entries, oldest first. The slice is shared; do not
// modify it.
func (h *History) Entries() []string { return h.entries }

// Add appends entry, unless it is blank or repeats the last entry, and
// writes it to the file (creating the file and its folder), unless it is
// longer than MaxHistoryEntry.
func (h *History) Add(entry string) error {
	entry = strings.TrimRight(entry, " \t\n")
	if strings.TrimSpace(entry) == "" {
		return nil
	}
	if n := len(h.entries); n > 0 && h.entries[n-1] == entry {
		return nil
	}
	h.entries = append(h.entries, entry)
	line := encodeEntry(entry)
	if h.path == "" || len(line) > MaxHistoryEntry {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return fmt.Errorf("cannot write history: %w", err)
	}
	if _, err := historyFile(h.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(h.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write history: %w", err)
	}
	_, err = f.WriteString(line + "\n")
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
