package processnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Container logs are kept in the CRI format the kubelet reads, one file per run of
// a container: "<RFC3339Nano time> <stdout|stderr> <F|P> <text>", F ending a line,
// P a part of a longer one.

const maxLogLine = 16 * 1024

// logWriter appends the lines of several streams to one file.
type logWriter struct {
	mu sync.Mutex
	w  io.Writer
	// now is time.Now, replaceable in tests.
	now func() time.Time
}

func newLogWriter(w io.Writer) *logWriter { return &logWriter{w: w, now: time.Now} }

// copyStream copies r to the log as stream (stdout or stderr) until EOF.
func (l *logWriter) copyStream(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tag := "P"
			if line[len(line)-1] == '\n' {
				tag = "F"
				line = line[:len(line)-1]
			} else if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				tag = "F" // the last, unterminated line
			}
			l.write(stream, tag, line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (l *logWriter) write(stream, tag string, text []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	b.WriteString(l.now().UTC().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteString(tag)
	b.WriteByte(' ')
	b.Write(text)
	b.WriteByte('\n')
	_, _ = l.w.Write(b.Bytes())
}

// LogOptions select what ReadLogs returns, like the kubelet's log options.
type LogOptions struct {
	Tail       int // last N lines; <0 all
	LimitBytes int // 0 no limit
	Timestamps bool
	Follow     bool
	SinceTime  time.Time
}

// logEntry is one parsed record.
type logEntry struct {
	ts      time.Time
	tsText  string
	partial bool
	text    string
}

func parseLogLine(line string) (logEntry, bool) {
	ts, rest, ok := strings.Cut(line, " ")
	if !ok {
		return logEntry{}, false
	}
	_, rest, ok = strings.Cut(rest, " ") // stream
	if !ok {
		return logEntry{}, false
	}
	tag, text, ok := strings.Cut(rest, " ")
	if !ok {
		return logEntry{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return logEntry{}, false
	}
	return logEntry{ts: t, tsText: ts, partial: tag == "P", text: text}, true
}

// renderLog turns parsed records into what a user sees: the text, lines ended,
// with the time in front when asked.
func renderLog(entries []logEntry, o LogOptions) []byte {
	var b bytes.Buffer
	startOfLine := true
	for _, e := range entries {
		if !o.SinceTime.IsZero() && e.ts.Before(o.SinceTime) {
			continue
		}
		if o.Timestamps && startOfLine {
			b.WriteString(e.tsText)
			b.WriteByte(' ')
		}
		b.WriteString(e.text)
		if !e.partial {
			b.WriteByte('\n')
		}
		startOfLine = !e.partial
	}
	return b.Bytes()
}

// tailEntries keeps the records of the last n full lines.
func tailEntries(entries []logEntry, n int) []logEntry {
	if n < 0 {
		return entries
	}
	lines := 0
	for i := len(entries) - 1; i >= 0; i-- {
		if !entries[i].partial {
			lines++
			if lines > n {
				return entries[i+1:]
			}
		}
	}
	return entries
}

// ReadLogs returns the log file at path rendered per o. With Follow it keeps
// reading as the file grows until finished reports true (and the file is read to
// its end) or ctx ends.
func ReadLogs(ctx context.Context, path string, o LogOptions, finished func() bool) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	// Only whole records: a record being written is read later.
	complete := bytes.LastIndexByte(data, '\n') + 1
	entries := parseLogData(data[:complete])
	entries = tailEntries(entries, o.Tail)
	first := renderLog(entries, o)
	if !o.Follow {
		_ = f.Close()
		return io.NopCloser(limitBytes(bytes.NewReader(first), o.LimitBytes)), nil
	}
	if _, err := f.Seek(int64(complete), io.SeekStart); err != nil {
		_ = f.Close()
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer func() { _ = f.Close() }()
		if _, err := pw.Write(first); err != nil {
			return
		}
		var pending []byte
		buf := make([]byte, 64*1024)
		for {
			done := finished()
			n, err := f.Read(buf)
			if n > 0 {
				pending = append(pending, buf[:n]...)
				if i := bytes.LastIndexByte(pending, '\n'); i >= 0 {
					out := renderLog(parseLogData(pending[:i+1]), LogOptions{Timestamps: o.Timestamps, SinceTime: o.SinceTime})
					pending = append([]byte(nil), pending[i+1:]...)
					if _, werr := pw.Write(out); werr != nil {
						return
					}
				}
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				_ = pw.CloseWithError(err)
				return
			}
			if done {
				_ = pw.Close()
				return
			}
			select {
			case <-ctx.Done():
				_ = pw.Close()
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	rc := struct {
		io.Reader
		io.Closer
	}{limitBytes(pr, o.LimitBytes), pr}
	return rc, nil
}

func limitBytes(r io.Reader, n int) io.Reader {
	if n <= 0 {
		return r
	}
	return io.LimitReader(r, int64(n))
}

func parseLogData(data []byte) []logEntry {
	var entries []logEntry
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		if e, ok := parseLogLine(line); ok {
			entries = append(entries, e)
		}
	}
	return entries
}
