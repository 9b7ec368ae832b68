package trainjob

import "testing"

func TestProgressString(t *testing.T) {
	cases := []struct {
		p    progress
		want string
	}{
		{progress{phase: "Created"}, "Created"},
		{progress{phase: "Pending", reason: "WaitingForPods", message: "0/2 nodes running", nodes: 2}, "Pending, 0/2 nodes ready (WaitingForPods: 0/2 nodes running)"},
		{progress{phase: "Running", reason: "AllNodesStarted", ready: 2, nodes: 2}, "Running, 2/2 nodes ready (AllNodesStarted)"},
		{progress{phase: "Complete", reason: "AllJobsCompleted", nodes: 2}, "Complete (AllJobsCompleted)"},
	}
	for _, tc := range cases {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}
