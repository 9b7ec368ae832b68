// Command testsummary reads the output of `go test -json` (mixed with any
// other lines, such as make's) on stdin, prints it as plain go test would (the
// package lines, the output of failed tests, and every line that is not a
// test event), optionally keeps the raw stream in a file, and ends with a
// summary per package: tests passed, failed and skipped.
//
// It exits 1 when a test or package failed, when a package that has tests ran
// none of them (its TestMain exited before m.Run: a suite that did not run),
// or, with -no-skips (.ci/run under CI), when a test was skipped, except a
// skip by design (test/prereq.Optional, whose message starts with
// prereq.OptionalMarker). The skipped tests are listed with their reasons.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// optionalMarker is test/prereq.OptionalMarker; a test checks they agree.
const optionalMarker = "prereq: optional: "

// event is one line of go test -json (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

type pkgResult struct {
	name                    string
	result                  string // pass, fail, skip (no test files) or "" (no end seen)
	passed, failed, skipped int    // top-level tests
	output                  []string
}

type skip struct {
	pkg, test, reason string
	optional          bool
}

type summary struct {
	pkgs  map[string]*pkgResult
	order []string
	buf   map[string][]string // output of a running test, by package + test
	skips []skip
	fails []string
}

func newSummary() *summary {
	return &summary{pkgs: map[string]*pkgResult{}, buf: map[string][]string{}}
}

func (s *summary) pkg(name string) *pkgResult {
	p := s.pkgs[name]
	if p == nil {
		p = &pkgResult{name: name}
		s.pkgs[name] = p
		s.order = append(s.order, name)
	}
	return p
}

// line handles one line of the stream, printing what a human reads to w.
func (s *summary) line(w io.Writer, l string) {
	var e event
	if !strings.HasPrefix(l, "{") || json.Unmarshal([]byte(l), &e) != nil || e.Action == "" {
		_, _ = fmt.Fprintln(w, l)
		return
	}
	switch e.Action {
	case "build-output":
		_, _ = fmt.Fprint(w, e.Output)
		return
	case "build-fail":
		return
	}
	if e.Package == "" {
		return
	}
	p := s.pkg(e.Package)
	if e.Test == "" {
		switch e.Action {
		case "output":
			p.output = append(p.output, e.Output)
			if e.Output != "PASS\n" {
				_, _ = fmt.Fprint(w, e.Output)
			}
		case "pass", "fail", "skip":
			p.result = e.Action
		}
		return
	}
	key := e.Package + "\x00" + e.Test
	top := !strings.Contains(e.Test, "/")
	switch e.Action {
	case "output":
		s.buf[key] = append(s.buf[key], e.Output)
	case "pass":
		if top {
			p.passed++
		}
		delete(s.buf, key)
	case "fail":
		if top {
			p.failed++
		}
		s.fails = append(s.fails, e.Package+" "+e.Test)
		for _, o := range s.buf[key] {
			_, _ = fmt.Fprint(w, o)
		}
		delete(s.buf, key)
	case "skip":
		if top {
			p.skipped++
		}
		reason := skipReason(s.buf[key])
		s.skips = append(s.skips, skip{pkg: e.Package, test: e.Test, reason: reason, optional: strings.Contains(reason, optionalMarker)})
		delete(s.buf, key)
	}
}

// skipReason is what a skipped test printed, without go test's own lines.
func skipReason(out []string) string {
	var r []string
	for _, o := range out {
		t := strings.TrimSpace(o)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		r = append(r, t)
	}
	return strings.Join(r, " | ")
}

// verdict writes the summary to w and returns the reasons for failing, if any.
func (s *summary) verdict(w io.Writer, noSkips bool) []string {
	var problems []string
	names := append([]string(nil), s.order...)
	sort.Strings(names)
	_, _ = fmt.Fprintf(w, "\n== tests per package: passed failed skipped\n")
	for _, n := range names {
		p := s.pkgs[n]
		switch p.result {
		case "skip":
			continue // no test files
		case "":
			problems = append(problems, n+": no result (the stream ended early)")
		case "fail":
			problems = append(problems, n+": FAIL")
		}
		if p.result != "" && p.passed+p.failed == 0 {
			problems = append(problems, n+": ran no tests"+mainSaid(p.output))
		}
		_, _ = fmt.Fprintf(w, "%6d %6d %6d  %s\n", p.passed, p.failed, p.skipped, n)
	}
	if len(s.skips) > 0 {
		_, _ = fmt.Fprintf(w, "== skipped tests\n")
		for _, k := range s.skips {
			_, _ = fmt.Fprintf(w, "  %s %s: %s\n", k.pkg, k.test, k.reason)
			if noSkips && !k.optional {
				problems = append(problems, fmt.Sprintf("%s %s: skipped under CI: %s", k.pkg, k.test, k.reason))
			}
		}
	}
	for _, f := range s.fails {
		problems = append(problems, f+": FAIL")
	}
	if len(problems) > 0 {
		_, _ = fmt.Fprintf(w, "== FAIL\n")
		for _, p := range problems {
			_, _ = fmt.Fprintf(w, "  %s\n", p)
		}
	} else {
		_, _ = fmt.Fprintf(w, "== every package ran its tests\n")
	}
	return problems
}

// mainSaid quotes what the package printed outside its tests (its TestMain's
// reason for not running them), without go test's result lines.
func mainSaid(out []string) string {
	var r []string
	for _, o := range out {
		t := strings.TrimSpace(o)
		if t == "" || t == "PASS" || t == "FAIL" || strings.HasPrefix(t, "ok ") || strings.HasPrefix(t, "FAIL\t") {
			continue
		}
		r = append(r, t)
	}
	if len(r) == 0 {
		return " (its TestMain exited before m.Run?)"
	}
	return ": " + strings.Join(r, " | ")
}

func run(in io.Reader, w io.Writer, raw io.Writer, noSkips bool) int {
	s := newSummary()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if raw != nil {
			_, _ = fmt.Fprintln(raw, sc.Text())
		}
		s.line(w, sc.Text())
	}
	if err := sc.Err(); err != nil {
		_, _ = fmt.Fprintln(w, "testsummary: reading the stream:", err)
		return 1
	}
	if len(s.verdict(w, noSkips)) > 0 {
		return 1
	}
	return 0
}

func main() { os.Exit(realMain()) }

func realMain() int {
	out := flag.String("o", "", "also write the raw stream to this file")
	noSkips := flag.Bool("no-skips", false, "fail on any skipped test except prereq.Optional's (CI)")
	flag.Parse()
	var raw io.Writer
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = f.Close() }()
		bw := bufio.NewWriter(f)
		defer func() { _ = bw.Flush() }()
		raw = bw
	}
	return run(os.Stdin, os.Stdout, raw, *noSkips)
}
