package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestContainerNodeConfigs checks what the container nodes' configurations
// must say for this machine's kind of host (cgroup v1, no image pulls).
func TestContainerNodeConfigs(t *testing.T) {
	dir := "/state/container-nodes/0"
	cd := containerdConfig(dir, true)
	for _, want := range []string{`snapshotter = "overlayfs"`, "SystemdCgroup = false", `bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/state/container-nodes/0/cni/net.d"`, `sandbox_image = "` + PauseImage + `"`,
		`address = "/state/container-nodes/0/containerd/containerd.sock"`, "restrict_oom_score_adj = true"} {
		if !strings.Contains(cd, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, cd)
		}
	}
	c := &Cluster{o: Options{StateDir: "/state", PodsPerNode: 110}, pki: pki{dir: "/state/pki"}}
	node := containerNode{ip: "192.0.2.2", kubeletPort: 10250, health: 10248, cgroupRoot: containerCgroupRoot("/state", 0),
		bridge: containerBridge("/state", 0), podCIDR: "10.253.0.0/24"}
	kc := c.kubeletConfig(dir, node)
	if kc["failCgroupV1"] != false || kc["cgroupDriver"] != "cgroupfs" || kc["staticPodPath"] != "" ||
		kc["containerRuntimeEndpoint"] != "unix:///state/container-nodes/0/containerd/containerd.sock" ||
		kc["syncFrequency"] != "5s" || kc["configMapAndSecretChangeDetectionStrategy"] != "Watch" {
		t.Errorf("kubelet config: %v", kc)
	}
	if len(node.bridge) > 15 {
		t.Errorf("bridge name %q longer than 15 characters", node.bridge)
	}
	b, err := json.Marshal(cniConfig(dir, 0, node))
	if err != nil || !strings.Contains(string(b), `"subnet":"10.253.0.0/24"`) || !strings.Contains(string(b), `"type":"portmap"`) {
		t.Errorf("CNI config: %s (%v)", b, err)
	}
	if got := unescapeMount(`/a\040b`); got != "/a b" {
		t.Errorf("unescapeMount: %q", got)
	}
}

func TestMissingCgroupControllers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mounts []string
		want   []string
	}{
		{"one per hierarchy", []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"}, nil},
		{"co-mounted", []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/systemd"}, nil},
		{"memory disabled", []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/pids"}, []string{"memory"}},
		{"systemd only", []string{"/sys/fs/cgroup/systemd"}, []string{"cpu", "cpuacct", "cpuset", "memory", "pids"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, missingCgroupControllers(tc.mounts)); diff != "" {
				t.Errorf("missing controllers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContainerNodePrerequisitesNameTheFix: with nothing on PATH every
// missing program is reported with the script that installs it, and Up
// would fail with the same errors before it starts anything
// (prepareContainerNodes).
func TestContainerNodePrerequisitesNameTheFix(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var got []string
	for _, err := range ContainerNodePrerequisites() {
		got = append(got, err.Error())
	}
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables"} {
		want := p + " is not on PATH: run " + ContainerNodePackagesScript + " (as root)"
		if !slices.Contains(got, want) {
			t.Errorf("prerequisites %q lack %q", got, want)
		}
	}
	c := &Cluster{o: Options{ContainerNodes: 1}}
	if err := c.prepareContainerNodes(context.Background()); err == nil || !strings.Contains(err.Error(), "containerd is not on PATH: run "+ContainerNodePackagesScript) {
		t.Errorf("prepareContainerNodes: %v, want the missing containerd and its fix", err)
	}
}

// TestClaimHost: a cluster waits for another live one and fails with how to
// stop it when its context ends; a dead one's registration is removed.
func TestClaimHost(t *testing.T) {
	hostRegistry = t.TempDir()
	defer func() { hostRegistry = "/run/trainyard/container-node-clusters" }()
	start, _, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(hostRegistry, "x")
	// A live registration: this process.
	if err := os.WriteFile(other, []byte(fmt.Sprintf("/other/state\n%d\n%d\n", os.Getpid(), start)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var waited []string
	progress := func(f string, a ...interface{}) { waited = append(waited, fmt.Sprintf(f, a...)) }
	err = claimHost(ctx, "/my/state", progress)
	if err == nil || !strings.Contains(err.Error(), "trainyard-local down --state-dir /other/state") || len(waited) != 1 {
		t.Errorf("claimHost beside a live cluster: %v (progress %q), want it to wait, then name how to stop /other/state", err, waited)
	}
	// The same registration from a process that is gone (start time 1: not this one).
	if err := os.WriteFile(other, []byte(fmt.Sprintf("/other/state\n%d\n1\n", os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := claimHost(context.Background(), "/my/state", progress); err != nil {
		t.Fatalf("claimHost beside a stale registration: %v", err)
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("the stale registration is still there")
	}
	if otherClusterOnHost("/third/state") != "/my/state" {
		t.Error("the claim of /my/state is not seen by another cluster")
	}
	releaseHost("/my/state")
	if got := otherClusterOnHost("/third/state"); got != "" {
		t.Errorf("after releaseHost another cluster still sees %q", got)
	}
}

// TestAPIServerAddresses: a host-only cluster's API server stays on the
// loopback interface without endpoints; with container nodes it listens on
// the node address only (host-only: issue #40; before, on every address) and
// advertises it, for the default/kubernetes Service's endpoints (pods'
// in-cluster configuration); the kubeconfigs name it.
func TestAPIServerAddresses(t *testing.T) {
	for _, tc := range []struct {
		nodeIP        string
		want, notWant []string
	}{
		{"", []string{"--advertise-address=127.0.0.1", "--bind-address=127.0.0.1", "--endpoint-reconciler-type=none"}, nil},
		{NodeAddress, []string{"--advertise-address=" + NodeAddress, "--bind-address=" + NodeAddress}, []string{"--endpoint-reconciler-type=none", "--bind-address=0.0.0.0"}},
	} {
		c := &Cluster{o: Options{StateDir: "/state", BinDir: "/bin"}, pki: pki{dir: "/state/pki"}, nodeIP: tc.nodeIP, ports: Ports{APIServer: 6443}}
		args := c.apiserverArgs()
		if want := tc.nodeIP; want != "" && c.apiserverAddr() != want+":6443" || want == "" && c.apiserverAddr() != "127.0.0.1:6443" {
			t.Errorf("node IP %q: the kubeconfigs' server %s", tc.nodeIP, c.apiserverAddr())
		}
		for _, w := range tc.want {
			if !slices.Contains(args, w) {
				t.Errorf("node IP %q: API server arguments lack %s: %v", tc.nodeIP, w, args)
			}
		}
		for _, w := range tc.notWant {
			if slices.Contains(args, w) {
				t.Errorf("node IP %q: API server arguments have %s", tc.nodeIP, w)
			}
		}
	}
}

// TestStatusServerURL: the manager gives pods the status server at the
// process nodes' bridge address without container nodes and at the node IP
// with them (container nodes' pods cannot reach the bridge address), and
// serves it there only (issue #40: not on the LAN address).
func TestStatusServerURL(t *testing.T) {
	for _, tc := range []struct{ nodeIP, want, bind string }{
		{"", "--status-server-url=https://" + ProcessHostAddress + ":8443", "--status-server-bind-address=:8443"},
		{NodeAddress, "--status-server-url=https://" + NodeAddress + ":8443", "--status-server-bind-address=" + NodeAddress + ":8443"},
	} {
		c := &Cluster{o: Options{StateDir: "/state"}, pki: pki{dir: "/state/pki"}, nodeIP: tc.nodeIP,
			ports: Ports{ManagerStatus: 8443}, replicas: []replicaPorts{{}}}
		args := c.managerArgs(0)
		for _, w := range []string{tc.want, tc.bind} {
			if !slices.Contains(args, w) {
				t.Errorf("node IP %q: manager arguments lack %s: %v", tc.nodeIP, w, args)
			}
		}
	}
}
