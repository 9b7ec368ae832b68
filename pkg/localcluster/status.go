package localcluster

import (
	"errors"
	"os"
	"slices"
)

// Down stops every component, newest first (SIGTERM, then SIGKILL after 10s). The
// state directory is left in place, logs included.
func (c *Cluster) Down() error {
	if c.proxy != nil {
		_ = c.proxy.Close()
	}
	return c.sup.stopAll()
}

// DownStateDir stops the cluster recorded in stateDir, from any process.
func DownStateDir(stateDir string) error {
	st, err := readState(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s := &supervisor{dir: stateDir, st: st, exits: map[int]chan struct{}{}}
	return s.stopAll()
}

// ProcessStatus is a recorded component and whether it still runs.
type ProcessStatus struct {
	Process
	Running bool
}

// StatusOf reports the components recorded in stateDir, oldest first, and the ports.
func StatusOf(stateDir string) ([]ProcessStatus, Ports, error) {
	st, err := readState(stateDir)
	if err != nil {
		return nil, Ports{}, err
	}
	ps := slices.Clone(st.Processes)
	slices.SortFunc(ps, func(a, b Process) int { return a.Seq - b.Seq })
	var out []ProcessStatus
	for _, p := range ps {
		out = append(out, ProcessStatus{Process: p, Running: procAlive(p.PID, p.StartTime)})
	}
	return out, st.Ports, nil
}
