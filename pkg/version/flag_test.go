package version

import (
	"bytes"
	"flag"
	"io"
	"testing"

	"github.com/spf13/pflag"
)

func TestFlag(t *testing.T) {
	// The standard library's flag sets and pflag's (cobra) take the same flag.
	parsers := map[string]func(args []string) (*Flag, error){
		"flag": func(args []string) (*Flag, error) {
			fs := flag.NewFlagSet("bin", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := RegisterFlag(fs)
			return f, fs.Parse(args)
		},
		"pflag": func(args []string) (*Flag, error) {
			fs := pflag.NewFlagSet("bin", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := RegisterFlag(fs)
			return f, fs.Parse(args)
		},
	}
	want := Get().String() + "\n"
	for name, parse := range parsers {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				args []string
				want string
			}{
				{args: []string{"--version"}, want: want},
				{args: []string{"--version=true"}, want: want},
				{args: nil},
				{args: []string{"--version=false"}},
			} {
				f, err := parse(tc.args)
				if err != nil {
					t.Fatalf("parse %q: %v", tc.args, err)
				}
				var out bytes.Buffer
				if got := f.Handled(&out); got != (tc.want != "") {
					t.Errorf("%q: Handled = %v, want %v", tc.args, got, tc.want != "")
				}
				if out.String() != tc.want {
					t.Errorf("%q: printed %q, want %q", tc.args, out.String(), tc.want)
				}
			}
		})
	}
}

// The version comes first, alone in its field: pkg/localcluster takes the first
// field of `trainyard-manager --version` as the cluster's version.
func TestFlagVersionFirst(t *testing.T) {
	fs := flag.NewFlagSet("bin", flag.ContinueOnError)
	f := RegisterFlag(fs)
	if err := fs.Parse([]string{"-version"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	f.Handled(&out)
	if fields := bytes.Fields(out.Bytes()); len(fields) == 0 || string(fields[0]) != Get().Version {
		t.Errorf("printed %q: want the version %q first", out.String(), Get().Version)
	}
}
