package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
)

// uploading starts a session whose model calls the client tool upload,
// with timeout and maxTimeout, and returns it with the call delivered to
// its page.
func uploading(t *testing.T, timeout, maxTimeout string, opts engine.Options) (*harness, engine.ClientCall) {
	t.Helper()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{
		{Name: "upload", Handler: engine.HandlerClient, Retry: &engine.RetryPolicy{Timeout: timeout, MaxTimeout: maxTimeout}},
	}}}
	b := newBrowser()
	h := setup(t, w, callsThenSummary(use("call_1", "upload", `{}`)), opts, b)
	h.send("go")
	return h, recv(t, b.calls, "the upload")
}

// TestProgressExtendsTheDeadline: each tool.progress moves the attempt's
// deadline to its timeout from then, never past maxTimeout from the
// attempt's start; pages see each report with the new deadline; without
// more reports the attempt times out at the cap.
func TestProgressExtendsTheDeadline(t *testing.T) {
	h, call := uploading(t, "1s", "3s", engine.Options{})
	start := h.clock.Now()
	half := 0.5
	report := func(at time.Duration, want time.Duration) {
		t.Helper()
		h.clock.Advance(at - h.clock.Now().Sub(start))
		if err := h.page.Progress(context.Background(), engine.ToolProgress{ID: call.ID, Attempt: 1, Progress: &half, Message: "uploading"}); err != nil {
			t.Fatalf("progress at %v: %v", at, err)
		}
		f := h.waitType(engine.EventToolProgress)
		if f.Deadline != engine.FormatDeadline(start.Add(want)) {
			t.Errorf("progress at %v: deadline %s, want %s", at, f.Deadline, engine.FormatDeadline(start.Add(want)))
		}
	}
	report(800*time.Millisecond, 1800*time.Millisecond)
	report(1500*time.Millisecond, 2500*time.Millisecond) // past the first deadline: the attempt lives on
	report(2400*time.Millisecond, 3*time.Second)         // capped
	h.clock.Advance(700 * time.Millisecond)              // 3.1 s: past the cap
	fin := h.waitFinished(call.ID)
	if fin.OK || fin.Code != string(engine.CodeTimeout) {
		t.Errorf("tool.finished %s, want a timeout at the cap", fin.Raw)
	}
	// The text says how long the attempt ran, not only its timeout.
	if want := "upload timed out: 1 attempt of 1s (the last ran 3s: progress reports moved its deadline), no answer from the browser."; fin.Error != want {
		t.Errorf("tool.finished error %q, want %q", fin.Error, want)
	}
}

// TestProgressCoalesced: reports that come faster than four a second are
// stored and sent once each 250 ms, the latest of them, its deadline from
// when it came; one near the deadline counts at once. Every report was an
// event and a state in the journal, sent to every page: an outside audit's
// page stored 120 MB in 5 s.
func TestProgressCoalesced(t *testing.T) {
	store := engine.NewMemoryStore()
	var appends atomic.Int64
	store.Fail = func(string, engine.Batch) error { appends.Add(1); return nil }
	h, call := uploading(t, "1s", "2s", engine.Options{Store: store})
	start := h.clock.Now()
	report := func(at time.Duration, chunk int) {
		t.Helper()
		h.clock.Advance(at - h.clock.Now().Sub(start))
		done := float64(chunk)
		if err := h.page.Progress(context.Background(), engine.ToolProgress{ID: call.ID, Attempt: 1, Progress: &done, Message: fmt.Sprintf("chunk %d", chunk)}); err != nil {
			t.Fatalf("report %d: %v", chunk, err)
		}
	}
	progressed := func() []string {
		var out []string
		for _, ev := range stored(t, store, h.s.ID()) {
			if ev.Type == engine.EventToolProgress {
				var f frame
				_ = json.Unmarshal(ev.Frame, &f)
				out = append(out, fmt.Sprintf("%s until %s", f.Message, f.Deadline))
			}
		}
		return out
	}
	until := func(d time.Duration) string { return engine.FormatDeadline(start.Add(d)) }
	h.transcript()
	before := appends.Load()
	for i := 0; i <= 20; i++ {
		report(time.Duration(i)*10*time.Millisecond, i) // 0 to 200 ms
	}
	h.transcript()
	if got, want := progressed(), []string{`"chunk 0" until ` + until(time.Second)}; !slices.Equal(got, want) {
		t.Fatalf("stored after 21 reports in 200 ms: %q, want %q", got, want)
	}
	if n := appends.Load() - before; n != 1 {
		t.Errorf("21 reports in 200 ms made %d appends, want 1", n)
	}
	h.clock.Advance(50 * time.Millisecond) // 250 ms: the window ends
	h.transcript()
	want := []string{`"chunk 0" until ` + until(time.Second), `"chunk 20" until ` + until(1200*time.Millisecond)}
	if got := progressed(); !slices.Equal(got, want) {
		t.Fatalf("stored at the window's end: %q, want %q", got, want)
	}
	// Past the window, at once. Within it, at its end: the deadline at its
	// cap, the latest report moves nothing, and it waits for the window's
	// end (it was stored at once, near the deadline, every one).
	report(1100*time.Millisecond, 21)
	report(1550*time.Millisecond, 22)
	report(1650*time.Millisecond, 23)
	h.transcript()
	want = append(want, `"chunk 21" until `+until(2*time.Second), `"chunk 22" until `+until(2*time.Second))
	if got := progressed(); !slices.Equal(got, want) {
		t.Fatalf("stored within the window, the deadline at its cap: %q, want %q", got, want)
	}
	h.clock.Advance(150 * time.Millisecond) // 1.8 s: the window ends
	h.transcript()
	want = append(want, `"chunk 23" until `+until(2*time.Second))
	if got := progressed(); !slices.Equal(got, want) {
		t.Fatalf("stored at the window's end: %q, want %q", got, want)
	}
}

// TestProgressCoalescedShortTimeout: an attempt whose timeout is shorter
// than the window takes a report that moves its deadline just before that
// deadline, not at the window's end (when it would have timed out), and
// still not each report; a report waiting when the attempt ends is
// dropped.
func TestProgressCoalescedShortTimeout(t *testing.T) {
	store := engine.NewMemoryStore()
	h, call := uploading(t, "100ms", "10s", engine.Options{Store: store})
	count := func() int {
		n := 0
		for _, ev := range stored(t, store, h.s.ID()) {
			if ev.Type == engine.EventToolProgress {
				n++
			}
		}
		return n
	}
	for i := range 100 { // a report each 10 ms for a second
		if err := h.page.Progress(context.Background(), engine.ToolProgress{ID: call.ID, Attempt: 1, Message: fmt.Sprint(i)}); err != nil {
			t.Fatalf("report %d, after %d stored: %v", i, count(), err)
		}
		h.transcript()
		h.clock.Advance(10 * time.Millisecond)
	}
	h.transcript()
	if n := count(); n < 10 || n > 16 {
		t.Errorf("100 reports in a second, each 75 ms before a deadline 100 ms away: %d stored, want one each 75 ms or so", n)
	}
	// One waits as the call is answered (the second of two at one
	// instant): it goes with the attempt.
	for _, m := range []string{"late", "later"} {
		if err := h.page.Progress(context.Background(), engine.ToolProgress{ID: call.ID, Attempt: 1, Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	h.transcript()
	before := count()
	h.answer(engine.ToolResult{ID: call.ID, Attempt: 1, Result: json.RawMessage(`"done"`)})
	h.waitFinished(call.ID)
	h.clock.Advance(time.Second)
	h.transcript()
	if n := count(); n != before {
		t.Errorf("a report waiting as the attempt ended was stored after it: %d, want %d", n, before)
	}
}

// TestProgressRefused: a report for another attempt, a settled call, a
// worker call, or with bad figures does not count.
func TestProgressRefused(t *testing.T) {
	release := make(chan struct{})
	w := &testWorker{
		agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "ask", Handler: engine.HandlerClient}, {Name: "lookup"}}},
		execute: func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			<-release
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`1`)}}}, nil
		},
	}
	defer close(release)
	b := newBrowser()
	h := setup(t, w, callsThenSummary(use("call_1", "ask", `{}`), use("call_2", "lookup", `{}`)), engine.Options{}, b)
	h.send("go")
	call := recv(t, b.calls, "ask")
	nan, neg := math.NaN(), -1.0
	for _, tc := range []struct {
		name    string
		pr      engine.ToolProgress
		want    error
		mention string
	}{
		{"another attempt", engine.ToolProgress{ID: call.ID, Attempt: 2}, engine.ErrStaleAttempt, ""},
		{"a worker's call", engine.ToolProgress{ID: "call_2", Attempt: 1}, engine.ErrUnknownCall, ""},
		{"no such call", engine.ToolProgress{ID: "call_9", Attempt: 1}, engine.ErrUnknownCall, ""},
		{"not a number", engine.ToolProgress{ID: call.ID, Attempt: 1, Progress: &nan}, engine.ErrBadRequest, `"progress" is NaN`},
		{"negative", engine.ToolProgress{ID: call.ID, Attempt: 1, Total: &neg}, engine.ErrBadRequest, `"total" is -1`},
	} {
		if err := h.page.Progress(context.Background(), tc.pr); !errors.Is(err, tc.want) || (err != nil && !strings.Contains(err.Error(), tc.mention)) {
			t.Errorf("%s: %v, want %v naming %s", tc.name, err, tc.want, tc.mention)
		}
	}
	h.answer(engine.ToolResult{ID: call.ID, Attempt: 1, Result: json.RawMessage(`true`)})
	h.waitFinished(call.ID)
	if err := h.page.Progress(context.Background(), engine.ToolProgress{ID: call.ID, Attempt: 1}); !errors.Is(err, engine.ErrStaleAttempt) {
		t.Errorf("after the call settled: %v, want ErrStaleAttempt", err)
	}
}

// TestWorkerProgress: a Go worker's long tool reports progress with the
// context Decide got, which keeps its attempt alive past its timeout.
func TestWorkerProgress(t *testing.T) {
	reported := make(chan error, 1)
	reportNow, finish := make(chan struct{}), make(chan struct{})
	w := &testWorker{
		agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "crunch", Retry: &engine.RetryPolicy{Timeout: "1s"}}}},
		execute: func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			<-reportNow
			reported <- engine.ReportProgress(ctx, 1, 2, "half way")
			select {
			case <-finish:
			case <-ctx.Done():
				return engine.Decision{}, ctx.Err()
			}
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"done"`)}}}, nil
		},
	}
	h := setup(t, w, callsThenSummary(use("call_1", "crunch", `{}`)), engine.Options{}, newBrowser())
	h.send("go")
	h.waitType(engine.EventToolStarted)
	h.clock.Advance(900 * time.Millisecond)
	close(reportNow)
	if err := recv(t, reported, "the report"); err != nil {
		t.Fatal(err)
	}
	if f := h.waitType(engine.EventToolProgress); f.Deadline == "" {
		t.Fatalf("tool.progress %s", f.Raw)
	}
	h.clock.Advance(500 * time.Millisecond) // 1.4 s: past the timeout, not the new deadline
	close(finish)
	if fin := h.waitFinished("call_1"); !fin.OK {
		t.Errorf("tool.finished %s, want the result", fin.Raw)
	}
	if err := engine.ReportProgress(context.Background(), 1, 2, ""); err == nil {
		t.Error("ReportProgress outside a tool.execute: no error")
	}
}

// TestProgressWindowEndsOnce: a report that came as a window ended, taken
// before the step that ends it (the window's timer posts that step behind
// it), opens a new window; a report after it waits for that window's end,
// not out at once beside it (an outside audit: pairs of events 0 to 4 ms
// apart, about six a second against four at most).
func TestProgressWindowEndsOnce(t *testing.T) {
	store := engine.NewMemoryStore()
	h, call := uploading(t, "10s", "", engine.Options{Store: store})
	start := h.clock.Now()
	report := func(chunk int) engine.ToolProgress {
		done := float64(chunk)
		return engine.ToolProgress{ID: call.ID, Attempt: 1, Progress: &done, Message: fmt.Sprintf("chunk %d", chunk)}
	}
	progressed := func() []string {
		h.transcript()
		var out []string
		for _, ev := range stored(t, store, h.s.ID()) {
			if ev.Type == engine.EventToolProgress {
				var f frame
				_ = json.Unmarshal(ev.Frame, &f)
				out = append(out, string(f.Message))
			}
		}
		return out
	}
	if err := h.page.Progress(context.Background(), report(0)); err != nil { // at once: a window opens
		t.Fatal(err)
	}
	h.clock.Advance(100 * time.Millisecond)
	if err := h.page.Progress(context.Background(), report(1)); err != nil { // waits for 250 ms
		t.Fatal(err)
	}
	err := h.s.InStep(context.Background(), func() {
		h.clock.Advance(160 * time.Millisecond) // 260 ms: the window's timer posts its step behind this one
		for _, chunk := range []int{2, 3} {     // 2 opens a window; 3 waits for its end
			if err := h.s.ProgressInStep(report(chunk)); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := progressed(), []string{`"chunk 0"`, `"chunk 2"`}; !slices.Equal(got, want) {
		t.Fatalf("stored at 260 ms: %q, want %q (chunk 3 waits for the window that opened at 260 ms)", got, want)
	}
	h.clock.Advance(start.Add(510 * time.Millisecond).Sub(h.clock.Now()))
	if got, want := progressed(), []string{`"chunk 0"`, `"chunk 2"`, `"chunk 3"`}; !slices.Equal(got, want) {
		t.Fatalf("stored at 510 ms: %q, want %q", got, want)
	}
}
