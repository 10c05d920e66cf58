package live

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testServer serves pages built from a file's text: one section with a
// table of two rows whose row charts and timelines are fakes.
func testServer(t *testing.T) (*Server, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plan.star")
	if err := os.WriteFile(file, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Files:    func() []string { return []string{file} },
		Interval: 10 * time.Millisecond,
		Build: func(context.Context) *Page {
			text, _ := os.ReadFile(file)
			return &Page{Title: string(text), Sections: []Section{
				{SVG: "<svg></svg>", Alive: func(e int) (Moment, error) {
					return Moment{Event: e, Tensors: []Tensor{{Name: "x", Bytes: 8}}}, nil
				}},
				{Table: &Table{Head: []string{"batch"}, Rows: [][]string{{"1"}, {"2"}}},
					Row: func(r int) (*RowChart, error) {
						return &RowChart{SVG: "<svg>row " + string(rune('0'+r)) + "</svg>", Alive: func(e int) (Moment, error) {
							return Moment{Event: e}, nil
						}}, nil
					}},
			}}
		},
	}
	return s, file
}

func get(t *testing.T, h http.Handler, url string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestServerEndpoints(t *testing.T) {
	s, _ := testServer(t)
	h := s.Handler()
	if code, _ := get(t, h, "/"); code != http.StatusServiceUnavailable {
		t.Errorf("before the first build: %d", code)
	}
	s.Rebuild(context.Background())
	for _, tc := range []struct {
		url  string
		code int
		has  string
	}{
		{"/", 200, "<h1>first</h1>"},
		{"/", 200, `<tr data-row="1"><td>2</td></tr>`},
		{"/", 200, "section[data-alive]"}, // the script
		{"/version", 200, `{"version":1}`},
		{"/alive?s=0&e=7", 200, `"event":7`},
		{"/alive?s=0&e=7", 200, `"name":"x"`},
		{"/alive?s=1&e=7", 400, "has no timeline"},
		{"/alive?s=9&e=7", 400, "no section"},
		{"/alive?s=0&e=x", 400, "whole number"},
		{"/row?s=1&r=1", 200, "<svg>row 1</svg>"},
		{"/row?s=1&r=2", 400, "no row 2"},
		{"/row?s=0&r=0", 400, "hold no reports"},
		{"/row-alive?s=1&r=0&e=3", 200, `"event":3`},
		{"/nothing", 404, ""},
	} {
		code, body := get(t, h, tc.url)
		if code != tc.code || !strings.Contains(body, tc.has) {
			t.Errorf("GET %s: %d %q, want %d with %q", tc.url, code, body, tc.code, tc.has)
		}
	}
}

// TestServerRebuildsOnSave saves the watched file and waits for the next
// build (the wait ends the test on a build that never comes; it times
// nothing).
func TestServerRebuildsOnSave(t *testing.T) {
	s, file := testServer(t)
	s.Rebuild(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Watch(ctx)
	time.Sleep(30 * time.Millisecond)
	if err := os.WriteFile(file, []byte("second, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Version() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no rebuild after the file was saved")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, body := get(t, s.Handler(), "/")
	if !strings.Contains(body, "<h1>second, longer</h1>") {
		t.Errorf("the page after the save:\n%s", body)
	}
	var v struct{ Version int }
	_, vb := get(t, s.Handler(), "/version")
	if err := json.Unmarshal([]byte(vb), &v); err != nil || v.Version != 2 {
		t.Errorf("/version = %s", vb)
	}
}

// TestPageEscapes checks that names from the script cannot inject markup.
func TestPageEscapes(t *testing.T) {
	p := &Page{Title: "<b>t</b>", Err: "<script>x</script>", Sections: []Section{{Text: "a<b", Table: &Table{Head: []string{"<h>"}, Rows: [][]string{{"<td>"}}, Notes: []string{"<n>"}}}}}
	var b strings.Builder
	if err := p.write(&b, 1); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<b>t</b>", "<script>x</script>", "a<b", "<h>", "<td><td>", "<n>"} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
}
