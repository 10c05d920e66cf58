package live

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Server serves the page of the latest build and rebuilds it when a
// watched file changes.
type Server struct {
	// Build runs the script and returns its page (with Err set when the
	// script fails: the page shows the error until the next save).
	Build func(ctx context.Context) *Page
	// Files lists the files whose changes rebuild the page.
	Files func() []string
	// Interval is how often the files are looked at (default 300 ms).
	Interval time.Duration
	// Log receives a line per rebuild (nil: none).
	Log io.Writer

	mu      sync.Mutex
	page    *Page
	version int
	stamps  map[string]stamp
	rows    map[[2]int]*RowChart
}

// stamp is what says a file changed.
type stamp struct {
	mod  time.Time
	size int64
	err  bool
}

// Version is the number of the current build (1 after the first).
func (s *Server) Version() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Rebuild runs Build and makes its page current.
func (s *Server) Rebuild(ctx context.Context) {
	stamps := s.look()
	p := s.Build(ctx)
	s.mu.Lock()
	s.page, s.stamps, s.rows = p, stamps, map[[2]int]*RowChart{}
	s.version++
	v := s.version
	s.mu.Unlock()
	if s.Log != nil {
		status := "ok"
		if p.Err != "" {
			status = "error"
		}
		fmt.Fprintf(s.Log, "memsh: build %d (%s) at %s\n", v, status, time.Now().Format("15:04:05"))
	}
}

// Watch rebuilds whenever a watched file changes, until ctx ends. A
// change is built once it has held for one interval: an editor's save
// (or os.WriteFile) truncates the file before writing it, and building the
// empty file in between would flash an error page.
func (s *Server) Watch(ctx context.Context) {
	every := s.Interval
	if every <= 0 {
		every = 300 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var seen map[string]stamp // the files as the last tick saw them, when they differed from the build's
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.mu.Lock()
			old := s.stamps
			s.mu.Unlock()
			now := s.look()
			switch {
			case !changed(old, now):
				seen = nil
			case seen != nil && !changed(seen, now):
				s.Rebuild(ctx)
				seen = nil
			default:
				seen = now // changed since the last build: wait for it to hold
			}
		}
	}
}

func (s *Server) look() map[string]stamp {
	out := map[string]stamp{}
	if s.Files == nil {
		return out
	}
	for _, f := range s.Files() {
		fi, err := os.Stat(f)
		if err != nil {
			out[f] = stamp{err: true}
			continue
		}
		out[f] = stamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out
}

func changed(a, b map[string]stamp) bool {
	if len(a) != len(b) {
		return true
	}
	for f, x := range a {
		if y, ok := b[f]; !ok || x != y {
			return true
		}
	}
	return false
}

// Handler serves the page (/), the build number (/version), what is alive
// at an event of a report's timeline (/alive?s=SECTION&e=EVENT), a table
// row's timeline (/row?s=SECTION&r=ROW) and what is alive on it
// (/row-alive?s=SECTION&r=ROW&e=EVENT).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveIndex)
	mux.HandleFunc("GET /version", s.serveVersion)
	mux.HandleFunc("GET /alive", s.serveAlive)
	mux.HandleFunc("GET /row", s.serveRow)
	mux.HandleFunc("GET /row-alive", s.serveRowAlive)
	return mux
}

func (s *Server) current() (*Page, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.page, s.version
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	p, v := s.current()
	if p == nil {
		http.Error(w, "no build yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := p.write(w, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request) {
	_, v := s.current()
	writeJSON(w, map[string]int{"version": v})
}

// section is the page's section named by the query's s.
func (s *Server) section(r *http.Request) (*Section, int, error) {
	p, _ := s.current()
	if p == nil {
		return nil, 0, fmt.Errorf("no build yet")
	}
	i, err := strconv.Atoi(r.URL.Query().Get("s"))
	if err != nil || i < 0 || i >= len(p.Sections) {
		return nil, 0, fmt.Errorf("no section %q (the page has %d)", r.URL.Query().Get("s"), len(p.Sections))
	}
	return &p.Sections[i], i, nil
}

func intParam(r *http.Request, name string) (int, error) {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil {
		return 0, fmt.Errorf("%s must be a whole number (got %q)", name, r.URL.Query().Get(name))
	}
	return n, nil
}

func (s *Server) serveAlive(w http.ResponseWriter, r *http.Request) {
	sec, _, err := s.section(r)
	if err == nil && sec.Alive == nil {
		err = fmt.Errorf("section %s has no timeline", r.URL.Query().Get("s"))
	}
	var e int
	if err == nil {
		e, err = intParam(r, "e")
	}
	var m Moment
	if err == nil {
		m, err = sec.Alive(e)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, m)
}

// rowChart is row ROW of section s's table, drawn once per build.
func (s *Server) rowChart(r *http.Request) (*RowChart, error) {
	sec, i, err := s.section(r)
	if err != nil {
		return nil, err
	}
	if sec.Row == nil {
		return nil, fmt.Errorf("section %d's rows hold no reports", i)
	}
	row, err := intParam(r, "r")
	if err != nil {
		return nil, err
	}
	if sec.Table == nil || row < 0 || row >= len(sec.Table.Rows) {
		return nil, fmt.Errorf("no row %d", row)
	}
	key := [2]int{i, row}
	s.mu.Lock()
	c, ok := s.rows[key]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err = sec.Row(row)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.rows != nil {
		s.rows[key] = c
	}
	s.mu.Unlock()
	return c, nil
}

func (s *Server) serveRow(w http.ResponseWriter, r *http.Request) {
	c, err := s.rowChart(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	io.WriteString(w, c.SVG)
}

func (s *Server) serveRowAlive(w http.ResponseWriter, r *http.Request) {
	c, err := s.rowChart(r)
	var e int
	if err == nil {
		e, err = intParam(r, "e")
	}
	if err == nil && c.Alive == nil {
		err = fmt.Errorf("the row's timeline has no trace")
	}
	var m Moment
	if err == nil {
		m, err = c.Alive(e)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, m)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}
