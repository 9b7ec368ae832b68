// Package prereq is the one place that decides what a test does when a
// prerequisite is missing (root, a Debian package, a built binary): outside CI
// it skips and says why; under CI (CI=true, which .ci/run exports) it fails
// with the same reason, so that a CI run cannot report "ok" for tests it never
// ran. .ci/run's summary (test/tools/testsummary) fails on any skip under CI
// except those made with Optional.
package prereq

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
)

// OptionalMarker starts the message of a skip made with Optional: a skip by
// design (a measurement that must be asked for, a check that does not apply to
// this machine), which test/tools/testsummary accepts under CI.
const OptionalMarker = "prereq: optional: "

// CI reports whether the tests run under CI: the environment variable CI is
// a true value (true, 1, ...), as .ci/run and most CI systems set it.
func CI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Require skips t with reason when ok is false, or fails it under CI. reason
// says what is missing and how to get it, e.g. "needs root" or
// "python3-torch missing: run `make debian-packages`".
func Require(t testing.TB, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if CI() {
		t.Fatal("missing prerequisite (CI=true: failing instead of skipping): " + reason)
		return
	}
	t.Skip("missing prerequisite: " + reason)
}

// Requiref is Require with a formatted reason.
func Requiref(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	Require(t, false, fmt.Sprintf(format, args...))
}

// Optional skips t by design, under CI too: reason says what the test needs
// that this run deliberately lacks (e.g. "a measurement: set TRAINYARD_MEASURE=1").
func Optional(t testing.TB, reason string) {
	t.Helper()
	t.Skip(OptionalMarker + reason)
}

// MainRequire is Require for a TestMain, before m.Run: when ok is false it
// prints the suite's name and reason on stderr and exits, with status 1 under
// CI and otherwise with status 0 after a line starting with "SKIP", so that a
// skipped suite is visible in go test's output.
func MainRequire(suite string, ok bool, reason string) {
	if ok {
		return
	}
	os.Exit(MainMissing(suite, reason))
}

// MainMissing is MainRequire for a TestMain that returns its exit status
// (os.Exit(run(m))): it prints the suite's name and reason on stderr and
// returns the status to exit with, 1 under CI and otherwise 0 after a line
// starting with "SKIP".
func MainMissing(suite, reason string) int {
	return mainExit(os.Stderr, CI(), suite, reason)
}

// mainExit writes why the suite does not run and returns the exit status.
func mainExit(w io.Writer, ci bool, suite, reason string) int {
	if ci {
		_, _ = fmt.Fprintf(w, "FAIL %s: missing prerequisite (CI=true: failing instead of skipping): %s\n", suite, reason)
		return 1
	}
	_, _ = fmt.Fprintf(w, "SKIP %s: no test ran, missing prerequisite: %s\n", suite, reason)
	return 0
}
