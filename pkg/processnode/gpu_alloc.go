package processnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// gpuStateFile, in the state directory, holds the GPUs given to each pod.
const gpuStateFile = "gpus.json"

// gpuAllocator gives each pod that requests nvidia.com/gpu distinct GPUs of
// the node for its whole life, as the kubelet's device manager does, and
// records them in a file of the state directory: an agent that restarts runs
// the pods of the API server again (the old agent's sandboxes are gone) and
// must give each the GPUs it had, and none of them to a new pod meanwhile.
// With no GPUs it still answers: no devices, or not enough.
type gpuAllocator struct {
	path  string // the state file; "" keeps nothing (tests)
	known []gpus.GPU

	mu   sync.Mutex
	pods map[string]podGPUs // by pod UID
}

// podGPUs are the GPUs of one pod, by container.
type podGPUs struct {
	// Pod is namespace/name, for whoever reads the file.
	Pod        string              `json:"pod"`
	Containers map[string][]string `json:"containers"`
}

type gpuState struct {
	Pods map[string]podGPUs `json:"pods"`
}

// errNotEnoughGPUs is a pod that asks for more GPUs than are free. The
// scheduler counts them, so it only happens when the node's state and the
// scheduler's disagree; the kubelet rejects such a pod the same way.
type errNotEnoughGPUs struct{ requested, free int }

func (e errNotEnoughGPUs) Error() string {
	return fmt.Sprintf("Allocate failed due to requested number of devices unavailable for %s. Requested: %d, Available: %d, which is unexpected",
		gpus.Resource, e.requested, e.free)
}

// reasonUnexpectedAdmission is the kubelet's reason for a pod whose devices
// could not be allocated.
const reasonUnexpectedAdmission = "UnexpectedAdmissionError"

// newGPUAllocator reads the allotments recorded in path (none when it does
// not exist). Allotments naming a GPU the node does not have now, or one
// already given to another pod, are dropped and said in the returned notes.
func newGPUAllocator(path string, known []gpus.GPU) (*gpuAllocator, []string, error) {
	a := &gpuAllocator{path: path, known: known, pods: map[string]podGPUs{}}
	if path == "" {
		return a, nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return a, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the GPU allotments: %w", err)
	}
	var st gpuState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, fmt.Errorf("reading the GPU allotments %s: %w", path, err)
	}
	var notes []string
	held := map[string]string{} // UUID -> pod
	for _, uid := range sortedKeys(st.Pods) {
		pg := st.Pods[uid]
		if why := a.conflict(pg, held); why != "" {
			notes = append(notes, fmt.Sprintf("dropped the GPUs of pod %s (%s): %s", pg.Pod, uid, why))
			continue
		}
		for _, u := range pg.uuids() {
			held[u] = pg.Pod
		}
		a.pods[uid] = pg
	}
	return a, notes, nil
}

// conflict says why a recorded allotment cannot stand, or "".
func (a *gpuAllocator) conflict(pg podGPUs, held map[string]string) string {
	for _, u := range pg.uuids() {
		if !slices.ContainsFunc(a.known, func(g gpus.GPU) bool { return g.UUID == u }) {
			return u + " is not a GPU of this node"
		}
		if other, ok := held[u]; ok {
			return u + " is recorded for pod " + other + " too"
		}
	}
	return ""
}

// uuids are the distinct GPUs of the pod (init containers reuse the others').
func (pg podGPUs) uuids() []string {
	var all []string
	for _, c := range sortedKeys(pg.Containers) {
		for _, u := range pg.Containers[c] {
			if !slices.Contains(all, u) {
				all = append(all, u)
			}
		}
	}
	return all
}

// containerGPUs is what a container asks of nvidia.com/gpu: its limit (an
// extended resource's request equals it), else its request.
func containerGPUs(c *corev1.Container) int {
	for _, list := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		if q, ok := list[gpus.Resource]; ok {
			return int(q.Value())
		}
	}
	return 0
}

// planGPUs hands a pod's GPUs, free ones in the node's order, to its
// containers as the kubelet counts them: the pod needs the most of any init
// container or the sum of its containers, whichever is more; each container
// gets its own, and init containers (which run before them, one at a time)
// take theirs from the front of the pod's.
func planGPUs(pod *corev1.Pod, free []string) (map[string][]string, error) {
	sum, maxInit := 0, 0
	for i := range pod.Spec.Containers {
		sum += containerGPUs(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		maxInit = max(maxInit, containerGPUs(&pod.Spec.InitContainers[i]))
	}
	need := max(sum, maxInit)
	if need == 0 {
		return nil, nil
	}
	if need > len(free) {
		return nil, errNotEnoughGPUs{requested: need, free: len(free)}
	}
	out := map[string][]string{}
	next := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if n := containerGPUs(c); n > 0 {
			out[c.Name] = slices.Clone(free[next : next+n])
			next += n
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if n := containerGPUs(c); n > 0 {
			out[c.Name] = slices.Clone(free[:n])
		}
	}
	return out, nil
}

// allocate returns the GPUs of each container of the pod that asks for some:
// those recorded for it (the pod runs again after an agent restart), else
// free ones, recorded before they are returned.
func (a *gpuAllocator) allocate(pod *corev1.Pod) (map[string][]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	uid := string(pod.UID)
	if pg, ok := a.pods[uid]; ok {
		return cloneDevices(pg.Containers), nil
	}
	held := map[string]bool{}
	for _, pg := range a.pods {
		for _, u := range pg.uuids() {
			held[u] = true
		}
	}
	var free []string
	for _, g := range a.known {
		if !held[g.UUID] {
			free = append(free, g.UUID)
		}
	}
	plan, err := planGPUs(pod, free)
	if err != nil || plan == nil {
		return nil, err
	}
	a.pods[uid] = podGPUs{Pod: pod.Namespace + "/" + pod.Name, Containers: plan}
	if err := a.saveLocked(); err != nil {
		delete(a.pods, uid)
		return nil, err
	}
	return cloneDevices(plan), nil
}

func cloneDevices(m map[string][]string) map[string][]string {
	out := make(map[string][]string, len(m))
	for c, uuids := range m {
		out[c] = slices.Clone(uuids)
	}
	return out
}

// release frees the GPUs of a pod that has ended.
func (a *gpuAllocator) release(uid string) error {
	return a.retain(func(u string) bool { return u != uid })
}

// retain keeps the allotments of the pods keep names (called with the
// allotments locked) and frees the others: once the agent has listed its
// pods, those that are gone from the API server or finished while no agent
// ran.
func (a *gpuAllocator) retain(keep func(uid string) bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	for uid := range a.pods {
		if !keep(uid) {
			delete(a.pods, uid)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return a.saveLocked()
}

// held returns a copy of the allotments, by pod UID.
func (a *gpuAllocator) held() map[string]podGPUs {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]podGPUs, len(a.pods))
	for uid, pg := range a.pods {
		out[uid] = pg
	}
	return out
}

// saveLocked writes the allotments atomically: a file next to the state
// file, synced, renamed over it, so that a crash leaves the old or the new.
func (a *gpuAllocator) saveLocked() error {
	if a.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(gpuState{Pods: a.pods}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(a.path), filepath.Base(a.path)+".*")
	if err != nil {
		return fmt.Errorf("recording the GPU allotments: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), a.path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("recording the GPU allotments in %s: %w", a.path, err)
	}
	return nil
}

// visibleGPUEnv sets, after everything else in a container's environment,
// which GPUs CUDA and NVIDIA's container tools let it use: its own, by UUID,
// or none (CUDA_VISIBLE_DEVICES empty, NVIDIA_VISIBLE_DEVICES=void). With no
// device cgroup this is what keeps a pod off the GPUs of others, so a value
// of the container's own never widens it.
func visibleGPUEnv(env []string, uuids []string) []string {
	cuda, nvidia := "", "void"
	if len(uuids) > 0 {
		cuda = strings.Join(uuids, ",")
		nvidia = cuda
	}
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != envCUDAVisible && k != envNvidiaVisible {
			out = append(out, kv)
		}
	}
	return append(out, envCUDAVisible+"="+cuda, envNvidiaVisible+"="+nvidia)
}

const (
	envCUDAVisible   = "CUDA_VISIBLE_DEVICES"
	envNvidiaVisible = "NVIDIA_VISIBLE_DEVICES"
)
