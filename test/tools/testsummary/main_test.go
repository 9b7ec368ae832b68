package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/test/prereq"
)

func TestOptionalMarker(t *testing.T) {
	if optionalMarker != prereq.OptionalMarker {
		t.Fatalf("optionalMarker %q differs from prereq.OptionalMarker %q", optionalMarker, prereq.OptionalMarker)
	}
}

// readStream returns testdata/stream.json: a go test -json run (between two of
// make's lines) of four packages: normal (two tests, one with a subtest),
// nomain (its TestMain exits 0 before m.Run), skipped (one test runs, one
// skips for a missing prerequisite, one is an optional skip) and notests (no
// test files).
func readStream(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/stream.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func summarize(t *testing.T, stream string, noSkips bool) (int, []string, string) {
	t.Helper()
	s := newSummary()
	var out bytes.Buffer
	for _, l := range strings.Split(strings.TrimSuffix(stream, "\n"), "\n") {
		s.line(&out, l)
	}
	problems := s.verdict(&out, noSkips)
	var raw, out2 bytes.Buffer
	code := run(strings.NewReader(stream), &out2, &raw, noSkips)
	if raw.String() != stream {
		t.Errorf("the raw copy differs from the stream")
	}
	if out2.String() != out.String() {
		t.Errorf("run printed\n%s\nwant\n%s", out2.String(), out.String())
	}
	return code, problems, out.String()
}

func TestRecordedStreamUnderCI(t *testing.T) {
	code, problems, out := summarize(t, readStream(t), true)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := []string{
		"example.com/rec/nomain: ran no tests: SKIP nomain: no test ran, missing prerequisite: needs root",
		"example.com/rec/skipped TestMissing: skipped under CI: s_test.go:7: missing prerequisite: mpirun missing: run `make debian-packages`",
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{
		"make[1]: Entering directory\n",    // lines that are not events pass through
		"fuzzing FuzzX in ./pkg for 10s\n", // ...
		"ok  \texample.com/rec/normal\t",   // the package lines of plain go test
		"     2      0      0  example.com/rec/normal\n",
		"     0      0      0  example.com/rec/nomain\n",
		"     1      0      2  example.com/rec/skipped\n",
		"example.com/rec/skipped TestMeasure: s_test.go:10: prereq: optional: a measurement",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"=== RUN", "--- PASS", "example.com/rec/notests\n"} {
		if strings.Contains(out, s) {
			t.Errorf("output has %q:\n%s", s, out)
		}
	}
}

func TestRecordedStreamOutsideCI(t *testing.T) {
	// Skips are fine outside CI; a package that ran nothing is not.
	code, problems, _ := summarize(t, readStream(t), false)
	if code != 1 || len(problems) != 1 || !strings.HasPrefix(problems[0], "example.com/rec/nomain: ran no tests") {
		t.Errorf("exit %d, problems %q; want only nomain's", code, problems)
	}
}

func TestNormalPackagesPass(t *testing.T) {
	var keep []string
	for _, l := range strings.Split(readStream(t), "\n") {
		if !strings.Contains(l, "/nomain") && !strings.Contains(l, "/skipped") {
			keep = append(keep, l)
		}
	}
	code, problems, out := summarize(t, strings.Join(keep, "\n"), true)
	if code != 0 || len(problems) != 0 {
		t.Errorf("exit %d, problems %q, want none:\n%s", code, problems, out)
	}
	if !strings.Contains(out, "== every package ran its tests") {
		t.Errorf("no verdict line:\n%s", out)
	}
}

func TestFailedTestPrintsItsOutput(t *testing.T) {
	stream := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestBad"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"    bad_test.go:9: got 1, want 2\n"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestBad","Elapsed":0}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}
{"Action":"fail","Package":"p","Elapsed":0}
`
	code, problems, out := summarize(t, stream, true)
	if code != 1 || strings.Join(problems, "\n") != "p: FAIL\np TestBad: FAIL" {
		t.Errorf("exit %d, problems %q", code, problems)
	}
	if !strings.Contains(out, "bad_test.go:9: got 1, want 2\n--- FAIL: TestBad") {
		t.Errorf("the failed test's output is missing:\n%s", out)
	}
}

func TestStreamEndedEarly(t *testing.T) {
	stream := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestLong"}
`
	code, problems, _ := summarize(t, stream, true)
	if code != 1 || len(problems) == 0 || !strings.Contains(problems[0], "no result") {
		t.Errorf("exit %d, problems %q", code, problems)
	}
}
