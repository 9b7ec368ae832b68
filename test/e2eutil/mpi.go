package e2eutil

import (
	"fmt"
	"strings"
)

// MPIAllreduce is an mpi4py program for `mpirun python3 -c`: every rank
// contributes rank+1 and prints the sum, n(n+1)/2 only when all n ranks took
// part, with its user and host, in a line that MPIResults reads.
const MPIAllreduce = `from mpi4py import MPI
import os, socket
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
print(f"MPI_RESULT rank={rank} size={size} sum={total} uid={os.getuid()} host={socket.gethostname()}", flush=True)
`

// MPIResult is what one rank of MPIAllreduce printed.
type MPIResult struct {
	Rank, Size, Sum, UID int
	Host                 string
}

// MPIResults are the lines of MPIAllreduce in logs, by rank.
func MPIResults(logs string) (map[int]MPIResult, error) {
	out := map[int]MPIResult{}
	for _, line := range strings.Split(logs, "\n") {
		if !strings.HasPrefix(line, "MPI_RESULT ") {
			continue
		}
		var r MPIResult
		if _, err := fmt.Sscanf(line, "MPI_RESULT rank=%d size=%d sum=%d uid=%d host=%s", &r.Rank, &r.Size, &r.Sum, &r.UID, &r.Host); err != nil {
			return nil, fmt.Errorf("reading %q: %w", line, err)
		}
		out[r.Rank] = r
	}
	return out, nil
}
