package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBinaryVersion(t *testing.T) {
	script := func(body string) string {
		p := filepath.Join(t.TempDir(), "manager")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, body, want, wantErr string
	}{
		{name: "the first field", body: `echo "v0.1.0-3-g1a2b3c4 (commit 1a2b3c4, go1.26.1)"`, want: "v0.1.0-3-g1a2b3c4"},
		{name: "a failing binary", body: "echo 'flag provided but not defined: -version' >&2; exit 2", wantErr: "flag provided but not defined"},
		{name: "no output", body: "true", wantErr: "printed nothing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := binaryVersion(context.Background(), script(tc.body))
			if got != tc.want || (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("binaryVersion = %q, %v; want %q and an error with %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
