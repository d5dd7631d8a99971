package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// samples are latencies, in the order they were taken.
type samples []time.Duration

// summary is a latency distribution.
type summary struct {
	n                  int
	p50, p90, p99, max time.Duration
}

func (s samples) summary() summary {
	if len(s) == 0 {
		return summary{}
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	at := func(q float64) time.Duration { return sorted[int(q*float64(len(sorted)-1))] }
	return summary{n: len(sorted), p50: at(0.50), p90: at(0.90), p99: at(0.99), max: sorted[len(sorted)-1]}
}

func (s summary) String() string {
	if s.n == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s  (n=%d)", fmtDur(s.p50), fmtDur(s.p90), fmtDur(s.p99), fmtDur(s.max), s.n)
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func fmtBytes(n float64) string {
	switch {
	case math.IsNaN(n):
		return "n/a"
	case n >= 1<<30 || n <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", n/(1<<30))
	case n >= 1<<20 || n <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
}

// monoNow is CLOCK_MONOTONIC in ns. Unlike time.Now's monotonic reading,
// which counts from the process's start, it is the same clock in every
// process of the machine, so a stamp taken in the gateway can be compared
// with a reading taken in the browser.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_MONOTONIC): %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}

// monoCost is what one monoNow costs (a system call, not the vDSO): each
// streaming delay includes about one of it.
func monoCost() time.Duration {
	const n = 10000
	start := time.Now()
	for i := 0; i < n; i++ {
		monoNow()
	}
	return time.Since(start) / n
}

// readProcStatus returns VmRSS and VmHWM of /proc/PID/status in bytes;
// pid "self" is this process.
func readProcStatus(pid string) (rss, hwm int64, err error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0, fmt.Errorf("failed to read memory status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("failed to read %s %q: %w", name, value, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// raiseFileLimit raises RLIMIT_NOFILE to want, the hard limit too when
// allowed (root), else as far as the hard limit goes. It returns the soft
// limit in force.
func raiseFileLimit(want uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("failed to read RLIMIT_NOFILE: %w", err)
	}
	if l.Cur >= want {
		return l.Cur, nil
	}
	next := syscall.Rlimit{Cur: want, Max: max(l.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err == nil {
		return want, nil
	}
	next = syscall.Rlimit{Cur: l.Max, Max: l.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		return l.Cur, fmt.Errorf("failed to raise RLIMIT_NOFILE from %d: %w", l.Cur, err)
	}
	return l.Max, nil
}

// machineBusy is the CPU seconds every process of the machine has used
// since boot (/proc/stat: all but idle and iowait), so a window's share
// taken by processes other than the two under test can be told.
func machineBusy() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("failed to read /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var busy float64
	for i, f := range fields[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/stat field %q", f)
		}
		busy += v
	}
	return busy / 100, nil // USER_HZ is 100 on Linux
}

// loadAverage is the first field of /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return f[0] + " " + f[1] + " " + f[2]
}

// machine describes where the figures were taken.
func machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				cpu = strings.TrimSpace(value)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs (%s), GOMAXPROCS %d, %s %s/%s, Linux %s", runtime.NumCPU(), cpu,
		runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, strings.TrimSpace(string(kernel)))
}
