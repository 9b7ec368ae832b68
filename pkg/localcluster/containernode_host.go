package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// One cluster with container nodes per host: two would share the pod CIDR,
// the Service CIDR and kube-proxy's KUBE-* chains (containernode_network.go),
// and each kube-proxy would rewrite the other's Services. A cluster with
// container nodes therefore registers its state directory in hostRegistry
// before it starts anything, and waits (within its context) while another
// registered cluster still runs; go test runs packages in parallel, so two
// test suites with container nodes take turns instead of breaking each
// other. An entry is live while the process that wrote it or any component
// of its cluster runs; stale entries are removed.
var hostRegistry = "/run/trainyard/container-node-clusters" // a variable for the unit test

// registryEntry is what a registration records: the state directory and the
// registering process (alive before any component is).
type registryEntry struct {
	stateDir string
	pid      int
	start    uint64
}

// claimHost waits until no other live cluster with container nodes is
// registered, then registers stateDir.
func claimHost(ctx context.Context, stateDir string, progress func(string, ...interface{})) error {
	waiting := false
	for {
		other, err := withRegistry(func() (string, error) {
			if other := liveOtherCluster(stateDir); other != "" {
				return other, nil
			}
			start, _, err := readStat(os.Getpid())
			if err != nil {
				return "", err
			}
			entry := fmt.Sprintf("%s\n%d\n%d\n", stateDir, os.Getpid(), start)
			return "", os.WriteFile(filepath.Join(hostRegistry, stateHash(stateDir)), []byte(entry), 0o644)
		})
		if err != nil || other == "" {
			return err
		}
		if !waiting {
			progress("waiting for the cluster with container nodes in %s to stop (one such cluster per host)", other)
			waiting = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("another local cluster with container nodes runs in %s (one per host: they would share the pod and "+
				"Service CIDRs and kube-proxy's chains); stop it with `trainyard-local down --state-dir %s`", other, other)
		case <-time.After(2 * time.Second):
		}
	}
}

// liveOtherCluster is the state directory of a live registered cluster other
// than stateDir's, or ""; it removes the stale entries it finds. The caller
// holds the registry's lock.
func liveOtherCluster(stateDir string) string {
	files, _ := os.ReadDir(hostRegistry)
	for _, f := range files {
		if f.Name() == ".lock" || f.Name() == stateHash(stateDir) {
			continue
		}
		path := filepath.Join(hostRegistry, f.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		e, ok := parseRegistryEntry(string(b))
		if ok && (procAlive(e.pid, e.start) || clusterRuns(e.stateDir)) {
			return e.stateDir
		}
		_ = os.Remove(path)
	}
	return ""
}

func parseRegistryEntry(s string) (registryEntry, bool) {
	f := strings.Split(strings.TrimSpace(s), "\n")
	if len(f) != 3 {
		return registryEntry{}, false
	}
	pid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[2], 10, 64)
	return registryEntry{stateDir: f[0], pid: pid, start: start}, err1 == nil && err2 == nil
}

// clusterRuns reports whether a component of the cluster in stateDir runs.
func clusterRuns(stateDir string) bool {
	st, err := readState(stateDir)
	if err != nil {
		return false
	}
	for _, p := range st.Processes {
		if procAlive(p.PID, p.StartTime) {
			return true
		}
	}
	return false
}

// releaseHost removes stateDir's registration, if any (Down, once its
// components stopped, and a failed Up).
func releaseHost(stateDir string) {
	if _, err := os.Stat(filepath.Join(hostRegistry, stateHash(stateDir))); err != nil {
		return
	}
	_, _ = withRegistry(func() (string, error) {
		return "", os.Remove(filepath.Join(hostRegistry, stateHash(stateDir)))
	})
}

// otherClusterOnHost reports the state directory of another live cluster with
// container nodes, "" if none (for Down: kube-proxy --cleanup would remove
// that cluster's Services).
func otherClusterOnHost(stateDir string) string {
	other, _ := withRegistry(func() (string, error) { return liveOtherCluster(stateDir), nil })
	return other
}

// withRegistry runs f with the registry's lock held (flock: two clusters
// starting at once see each other's registration).
func withRegistry(f func() (string, error)) (string, error) {
	if err := os.MkdirAll(hostRegistry, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(hostRegistry, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	return f()
}
