package processnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func writeTestLog(t *testing.T, path string, stream string, input string, start time.Time) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w := newLogWriter(f)
	n := 0
	w.now = func() time.Time { n++; return start.Add(time.Duration(n) * time.Second) }
	w.copyStream(stream, strings.NewReader(input))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readLogs(t *testing.T, path string, o LogOptions) string {
	t.Helper()
	rc, err := ReadLogs(context.Background(), path, o, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLogsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	writeTestLog(t, path, "stdout", "one\ntwo\nthree\nno newline", start)

	if got := readLogs(t, path, LogOptions{Tail: -1}); got != "one\ntwo\nthree\nno newline\n" {
		t.Errorf("all: %q", got)
	}
	if got := readLogs(t, path, LogOptions{Tail: 2}); got != "three\nno newline\n" {
		t.Errorf("tail 2: %q", got)
	}
	if got := readLogs(t, path, LogOptions{Tail: -1, LimitBytes: 5}); got != "one\nt" {
		t.Errorf("limit 5: %q", got)
	}
	if got := readLogs(t, path, LogOptions{Tail: 1, Timestamps: true}); got != "2026-01-02T03:04:09Z no newline\n" {
		t.Errorf("timestamps: %q", got)
	}
	if got := readLogs(t, path, LogOptions{Tail: -1, SinceTime: start.Add(3 * time.Second)}); got != "three\nno newline\n" {
		t.Errorf("since: %q", got)
	}
	if got := readLogs(t, filepath.Join(t.TempDir(), "none"), LogOptions{Tail: -1}); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

func TestLogsLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	long := strings.Repeat("x", maxLogLine+10)
	writeTestLog(t, path, "stderr", long+"\nshort\n", time.Now())
	raw, _ := os.ReadFile(path)
	if !bytes.Contains(raw, []byte(" stderr P ")) {
		t.Errorf("a line longer than %d bytes is split into partial records", maxLogLine)
	}
	got := readLogs(t, path, LogOptions{Tail: 1})
	if got != "short\n" {
		t.Errorf("tail of partial lines: %q", got)
	}
	got = readLogs(t, path, LogOptions{Tail: -1})
	if got != long+"\nshort\n" {
		t.Errorf("partial records are joined again (len %d)", len(got))
	}
}

func TestLogsFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeTestLog(t, path, "stdout", "before\n", time.Now())
	done := make(chan struct{})
	finished := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	rc, err := ReadLogs(context.Background(), path, LogOptions{Tail: -1, Follow: true}, finished)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() { b, _ := io.ReadAll(rc); got <- string(b) }()
	time.Sleep(150 * time.Millisecond)
	writeTestLog(t, path, "stdout", "after\n", time.Now())
	time.Sleep(150 * time.Millisecond)
	close(done)
	select {
	case s := <-got:
		if s != "before\nafter\n" {
			t.Errorf("follow: %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end once the container finished")
	}
}

func TestFallbackMessage(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "2026-01-02T03:04:05.000000001Z stderr F line %d\n", i)
	}
	b.WriteString("2026-01-02T03:04:05.000000001Z stderr P no newline\n")
	path := filepath.Join(dir, "0.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := fallbackMessage(path)
	var want strings.Builder
	for i := 21; i <= 100; i++ { // the last 80 full lines, then the unfinished one
		fmt.Fprintf(&want, "line %d\n", i)
	}
	want.WriteString("no newline")
	if diff := cmp.Diff(want.String(), got); diff != "" {
		t.Errorf("fallbackMessage (-want +got):\n%s", diff)
	}

	long := "2026-01-02T03:04:05.000000001Z stdout F " + strings.Repeat("x", 3000) + "end\n"
	if err := os.WriteFile(path, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fallbackMessage(path); len(got) != fallbackMaxBytes || !strings.HasSuffix(got, "xend\n") {
		t.Errorf("a long line gives %d bytes ending %q, want the last %d", len(got), got[max(len(got)-5, 0):], fallbackMaxBytes)
	}
}
