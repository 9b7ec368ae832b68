package initializer

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress counts the bytes fetched and logs a line every interval.
type progress struct {
	n        atomic.Int64
	total    int64
	start    time.Time
	out      io.Writer
	done     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func newProgress(out io.Writer, total int64, every time.Duration) *progress {
	p := &progress{total: total, start: time.Now(), out: out, done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.line()
			}
		}
	}()
	return p
}

func (p *progress) line() {
	n := p.n.Load()
	secs := time.Since(p.start).Seconds()
	pct := ""
	if p.total > 0 {
		pct = fmt.Sprintf(" (%.0f%%)", 100*float64(n)/float64(p.total))
	}
	fmt.Fprintf(p.out, "progress: %s of %s%s, %.1f MB/s\n", humanBytes(n), humanBytes(p.total), pct, float64(n)/1e6/max(secs, 1e-3))
}

func (p *progress) add(n int64)  { p.n.Add(n) }
func (p *progress) bytes() int64 { return p.n.Load() }

func (p *progress) stop() {
	p.stopOnce.Do(func() { close(p.done) })
	p.wg.Wait()
}

func (p *progress) reader(r io.Reader) io.Reader { return &countingReader{r: r, p: p} }

type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(int64(n))
	return n, err
}

// retry runs f up to attempts times, waiting base, 2*base, ... between
// attempts, unless f fails permanently or ctx ends.
func retry(ctx context.Context, attempts int, base time.Duration, logf func(string, ...any), what string, f func() error) error {
	wait := base
	for i := 1; ; i++ {
		err := f()
		if err == nil {
			return nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || i >= attempts || ctx.Err() != nil {
			return err
		}
		logf("%s: attempt %d of %d failed: %v; retrying in %s", what, i, attempts, err, wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (after: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// matchAny reports whether name matches one of the patterns with Python's
// fnmatch rules (upstream's initializers use fnmatch): * and ? match any
// characters, "/" included; [seq] and [!seq] are character classes.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if fnmatch(p).MatchString(name) {
			return true
		}
	}
	return false
}

var (
	fnmatchMu    sync.Mutex
	fnmatchCache = map[string]*regexp.Regexp{}
)

func fnmatch(pattern string) *regexp.Regexp {
	fnmatchMu.Lock()
	defer fnmatchMu.Unlock()
	if re, ok := fnmatchCache[pattern]; ok {
		return re
	}
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i + 1
			if j < len(rs) && rs[j] == '!' {
				j++
			}
			if j < len(rs) && rs[j] == ']' {
				j++
			}
			for j < len(rs) && rs[j] != ']' {
				j++
			}
			if j >= len(rs) { // no closing bracket: a literal [
				b.WriteString(`\[`)
				continue
			}
			class := string(rs[i+1 : j])
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			} else if strings.HasPrefix(class, "^") {
				class = `\` + class
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i = j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`\z`)
	re, err := regexp.Compile(b.String())
	if err != nil { // a class regexp rejects: match the pattern literally
		re = regexp.MustCompile(`\A` + regexp.QuoteMeta(pattern) + `\z`)
	}
	fnmatchCache[pattern] = re
	return re
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ungzipTree replaces every *.gz file under dir by its decompressed content.
func ungzipTree(dir string, logf func(string, ...any)) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".gz") {
			return err
		}
		out := strings.TrimSuffix(path, ".gz")
		n, err := gunzipFile(path, out)
		if err != nil {
			return fmt.Errorf("decompressing %s: %w", strings.TrimPrefix(path, dir+"/"), err)
		}
		logf("decompressed %s (%s)", strings.TrimPrefix(out, dir+"/"), humanBytes(n))
		return os.Remove(path)
	})
}

func gunzipFile(in, out string) (int64, error) {
	f, err := os.Open(in)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return 0, err
	}
	w, err := os.Create(out)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, zr)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return n, err
}
