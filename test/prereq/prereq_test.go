package prereq

import (
	"bytes"
	"strings"
	"testing"
)

// fakeTB records Skip and Fatal instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Skip(args ...any)  { f.skipped = args[0].(string) }
func (f *fakeTB) Fatal(args ...any) { f.failed = args[0].(string) }

func TestRequire(t *testing.T) {
	for _, tc := range []struct {
		name, ci   string
		ok         bool
		skip, fail bool
	}{
		{name: "met", ci: "true", ok: true},
		{name: "met outside CI", ci: "", ok: true},
		{name: "missing outside CI", ci: "", skip: true},
		{name: "missing, CI=false", ci: "false", skip: true},
		{name: "missing under CI", ci: "true", fail: true},
		{name: "missing, CI=1", ci: "1", fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			f := &fakeTB{}
			Require(f, tc.ok, "needs root")
			if got := f.skipped != ""; got != tc.skip {
				t.Errorf("skipped = %q, want a skip: %v", f.skipped, tc.skip)
			}
			if got := f.failed != ""; got != tc.fail {
				t.Errorf("failed = %q, want a failure: %v", f.failed, tc.fail)
			}
			if msg := f.skipped + f.failed; (tc.skip || tc.fail) && !strings.Contains(msg, "needs root") {
				t.Errorf("message %q does not give the reason", msg)
			}
			if strings.HasPrefix(f.skipped, OptionalMarker) {
				t.Errorf("a missing prerequisite reads as an optional skip: %q", f.skipped)
			}
		})
	}
}

func TestRequiref(t *testing.T) {
	t.Setenv("CI", "true")
	f := &fakeTB{}
	Requiref(f, false, "%s missing: run `make debian-packages`", "mpirun")
	if !strings.Contains(f.failed, "mpirun missing: run `make debian-packages`") {
		t.Errorf("failed = %q", f.failed)
	}
}

func TestOptional(t *testing.T) {
	t.Setenv("CI", "true")
	f := &fakeTB{}
	Optional(f, "a measurement: set TRAINYARD_MEASURE=1")
	if f.failed != "" || f.skipped != OptionalMarker+"a measurement: set TRAINYARD_MEASURE=1" {
		t.Errorf("skipped = %q, failed = %q", f.skipped, f.failed)
	}
}

func TestMainExit(t *testing.T) {
	var b bytes.Buffer
	if code := mainExit(&b, true, "processnode e2e", "needs root"); code != 1 {
		t.Errorf("under CI: exit %d, want 1", code)
	}
	if got := b.String(); !strings.HasPrefix(got, "FAIL processnode e2e:") || !strings.Contains(got, "needs root") {
		t.Errorf("under CI: printed %q", got)
	}
	b.Reset()
	if code := mainExit(&b, false, "processnode e2e", "needs root"); code != 0 {
		t.Errorf("outside CI: exit %d, want 0", code)
	}
	if got := b.String(); !strings.HasPrefix(got, "SKIP processnode e2e:") || !strings.Contains(got, "needs root") {
		t.Errorf("outside CI: printed %q", got)
	}
}

func TestMainMissing(t *testing.T) {
	t.Setenv("CI", "true")
	if code := MainMissing("volcano e2e", "local cluster binaries missing"); code != 1 {
		t.Errorf("under CI: exit %d, want 1", code)
	}
	t.Setenv("CI", "")
	if code := MainMissing("volcano e2e", "local cluster binaries missing"); code != 0 {
		t.Errorf("outside CI: exit %d, want 0", code)
	}
}
