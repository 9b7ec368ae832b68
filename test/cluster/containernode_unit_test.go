package cluster

import (
	"encoding/json"
	"strings"
	"testing"
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
		kc["containerRuntimeEndpoint"] != "unix:///state/container-nodes/0/containerd/containerd.sock" {
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
