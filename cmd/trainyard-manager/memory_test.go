package main

import (
	"runtime/debug"
	"testing"
)

func TestMemoryOptions(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // restore the test binary's limit
	cases := map[string]struct {
		limit      string
		gomemlimit string
		want       int64
		wantErr    bool
	}{
		"none":                       {},
		"a quantity":                 {limit: "512Mi", want: 483183820},
		"bytes, as the downward API": {limit: "1073741824", want: 966367641},
		"GOMEMLIMIT wins":            {limit: "512Mi", gomemlimit: "100MiB"},
		"not a quantity":             {limit: "lots", wantErr: true},
		"zero":                       {limit: "0", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			before := debug.SetMemoryLimit(-1)
			o := memoryOptions{limit: tc.limit}
			got, err := o.apply()
			if (err != nil) != tc.wantErr {
				t.Fatalf("apply() error = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("apply() = %d, want %d", got, tc.want)
			}
			now := debug.SetMemoryLimit(-1)
			switch {
			case tc.want > 0 && now != tc.want:
				t.Errorf("runtime limit %d, want %d", now, tc.want)
			case tc.want == 0 && now != before:
				t.Errorf("runtime limit changed to %d, want it left at %d", now, before)
			}
			debug.SetMemoryLimit(before)
		})
	}
}
