package host

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress draws a bar on a terminal for long jobs (sweeps, searches):
// nothing for the first half second, then at most ten redraws a second,
// and the line is cleared when the job ends. A nil writer draws nothing.
type progress struct {
	w           io.Writer
	what        string
	total       int
	start, last time.Time
	drawn       bool
}

// Progress bar timing: jobs shorter than progressDelay draw nothing.
const (
	progressDelay = 500 * time.Millisecond
	progressEvery = 100 * time.Millisecond
	progressWidth = 30
)

func NewProgress(w io.Writer, what string, total int) *progress {
	return &progress{w: w, what: what, total: total, start: time.Now()}
}

// set reports done of total; callers serialize their calls.
func (p *progress) Set(done int) {
	if p.w == nil || p.total <= 1 {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < progressDelay || (p.drawn && now.Sub(p.last) < progressEvery && done < p.total) {
		return
	}
	p.last, p.drawn = now, true
	fill := progressWidth * done / p.total
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.what, strings.Repeat("=", fill), strings.Repeat(" ", progressWidth-fill), done, p.total)
}

// setTotal changes the expected total (a search learns it as it goes).
func (p *progress) SetTotal(total int) { p.total = total }

// finish clears the bar.
func (p *progress) Finish() {
	if p.w != nil && p.drawn {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", len(p.what)+progressWidth+24))
	}
}
