package e2eutil

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMPIResults(t *testing.T) {
	logs := "Warning: Permanently added\n" +
		"MPI_RESULT rank=1 size=2 sum=3 uid=1000 host=job-node-0-1\n" +
		"MPI_RESULT rank=0 size=2 sum=3 uid=1000 host=job-node-0-0\n"
	got, err := MPIResults(logs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]MPIResult{
		0: {Rank: 0, Size: 2, Sum: 3, UID: 1000, Host: "job-node-0-0"},
		1: {Rank: 1, Size: 2, Sum: 3, UID: 1000, Host: "job-node-0-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if _, err := MPIResults("MPI_RESULT rank=x\n"); err == nil {
		t.Error("a malformed MPI_RESULT line was read without an error")
	}
}
