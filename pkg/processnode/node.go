package processnode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// nodeSpec is the Node the agent registers: the host's CPUs (times
// CPUOvercommit), memory and GPUs (nvidia.com/gpu, with GFD's labels), Ready,
// reachable at HostIP:port. Its labels are those NodeRestriction lets a node
// set on itself (no kubernetes.io label but a kubelet's).
func nodeSpec(cfg Config, port int, gpuList []gpus.GPU) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(float64(runtime.NumCPU())*cfg.CPUOvercommit*1000), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	if len(gpuList) > 0 {
		capacity[gpus.Resource] = *resource.NewQuantity(int64(len(gpuList)), resource.DecimalSI)
	}
	lbls := map[string]string{
		"type":                   "process",
		"kubernetes.io/hostname": cfg.NodeName,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     runtime.GOARCH,
		PoolLabel:                PoolProcess,
		ProcessNodeLabel:         "true",
	}
	for k, v := range gpus.Labels(gpuList) {
		lbls[k] = v
	}
	for k, v := range cfg.Labels {
		lbls[k] = v
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: cfg.Taints, PodCIDR: cfg.PodCIDR, PodCIDRs: []string{cfg.PodCIDR}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "trainyard process node is ready"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", ""),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: cfg.HostIP},
				{Type: corev1.NodeHostName, Address: cfg.NodeName},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				KernelVersion:           unix.ByteSliceToString(uts.Release[:]),
				OSImage:                 osImage(),
				KubeletVersion:          kubeletVersion(),
				ContainerRuntimeVersion: "process://1",
			},
		},
	}
}

// syncNodeLabels puts the labels of node on the Node of the API server: the
// node controller registers a new Node with them but only updates the status
// of one that exists (the agent restarted), so a GPU found or gone since, or
// changed --node-labels, would not show. GFD's labels the node no longer
// has are removed; other labels are left to whoever set them.
func syncNodeLabels(ctx context.Context, client kubernetes.Interface, node *corev1.Node) error {
	labels := map[string]interface{}{}
	for _, k := range []string{gpus.LabelProduct, gpus.LabelMemory, gpus.LabelCount} {
		labels[k] = nil
	}
	for k, v := range node.Labels {
		labels[k] = v
	}
	patch, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"labels": labels}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s: %w", node.Name, err)
	}
	return nil
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

func lookPathHost(name string) (string, error) {
	for _, d := range filepath.SplitList(os.Getenv("PATH") + ":" + DefaultPath) {
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// KubernetesRelease is the Kubernetes release whose API the node speaks: the
// k8s.io/api v0.X.Y in go.mod is Kubernetes v1.X.Y (a test keeps them equal).
// The node reports it as its kubelet's version, so that version-skew checks
// see a kubelet as new as the API it was built against.
const KubernetesRelease = "v1.37.2"

func kubeletVersion() string { return KubernetesRelease + "-trainyard-process-node" }
