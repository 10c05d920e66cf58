package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/memsh/memsh/sim/units"
)

// --max-memory bounds the memory a script's statements may build
// ([0] * 10**9, a string doubled forty times): a watcher reads the Go heap
// every memoryTick while a script (or a REPL statement) runs and, past the
// limit, cancels the script's context with a cause naming the flag. The
// thread stops at its next step with an error at the statement; long
// builtins (simulate, sweep, search) stop through the same context.
//
// The default is a quarter of the machine's memory (or of the cgroup's
// limit, when lower; 4 GiB when neither can be read): one Starlark
// operation can allocate twice what a value holds (s + s) before the
// watcher sees it, so the limit leaves room for that. 0 turns it off.

// memoryTick is how often the watcher reads the heap: a read costs about
// a microsecond; a script builds at most a few GB in that time.
const memoryTick = 10 * time.Millisecond

// fallbackMemory is the machine memory assumed when it cannot be read.
const fallbackMemory = 16 << 30

// defaultMaxMemory is a quarter of the machine's memory, as ram reports it.
func defaultMaxMemory(ram func() int64) int64 {
	n := ram()
	if n <= 0 {
		n = fallbackMemory
	}
	return n / 4
}

// machineMemory is the memory this process may use: the physical memory,
// or the cgroup's limit when it is lower; 0 when neither can be read.
func machineMemory() int64 {
	n := memTotal()
	if c := cgroupLimit(); c > 0 && (n == 0 || c < n) {
		n = c
	}
	return n
}

// memTotal reads MemTotal from /proc/meminfo (Linux); 0 elsewhere.
func memTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 0
}

// cgroupLimit reads the memory limit of the process's cgroup (v2, then
// v1); 0 when there is none.
func cgroupLimit() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err == nil && n > 0 && n < 1<<60 { // v1 says "no limit" with a huge number
			return n
		}
	}
	return 0
}

// memoryFlag is the value of --max-memory: a size ("8GiB", "500MB",
// "1073741824"); 0 turns the limit off. set says it was given.
type memoryFlag struct {
	bytes int64
	set   bool
}

// Set parses a size: a number of bytes, or a number with a unit, binary
// (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB, TB).
func (m *memoryFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	m.bytes, m.set = n, true
	return nil
}

func (m *memoryFlag) String() string { return strconv.FormatInt(m.bytes, 10) }

var sizeUnits = []struct {
	suffix string
	scale  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func parseSize(s string) (int64, error) {
	num, scale := strings.TrimSpace(s), 1.0
	for _, u := range sizeUnits {
		if len(num) > len(u.suffix) && strings.EqualFold(num[len(num)-len(u.suffix):], u.suffix) {
			num, scale = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.scale
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || f*scale > float64(units.MaxBytes) {
		return 0, fmt.Errorf("want a size such as 8GiB, 512MiB or 0 for no limit (got %q)", s)
	}
	return int64(f * scale), nil
}

// memoryContext returns ctx limited to e.maxMemory of Go heap: a watcher
// cancels it, with a cause naming the flag, once the live heap passes the
// limit. Call stop when the script or statement is done.
func (e *env) memoryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	limit := e.maxMemory.bytes
	if limit <= 0 {
		return ctx, func() { cancel(nil) }
	}
	debug.SetMemoryLimit(limit) // the collector runs as the heap nears the limit
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(memoryTick)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if heapOver(limit) {
					cancel(fmt.Errorf("memory use passed the limit of %s (use --max-memory to raise)", units.FormatBytes(limit)))
					return
				}
			}
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// heapOver says whether the Go heap exceeds limit: its live objects as the
// last collection marked them (the runtime's memory limit, set to the
// same, makes it collect as the heap nears it), or its objects, live or
// not yet swept, past twice the limit (one allocation larger than any
// garbage the collector let pile up).
func heapOver(limit int64) bool {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	live, objects := int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
	return live > limit || objects/2 > limit
}
