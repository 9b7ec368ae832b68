package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// Process nodes: each runs the trainyard-node agent (pkg/processnode) with the
// admin kubeconfig. Its kubelet API (container logs) is served on a free port of
// 127.0.0.1 with the cluster's serving certificate and requires a client
// certificate of the cluster CA, which the API server presents
// (--kubelet-client-certificate). All process nodes' pods share one bridge,
// named after the state directory, and one /16; node i hands out 10.254.i.0/24.
//
// The local cluster has one user: its process nodes are untainted
// (--register-taint=false), so that Kubeflow's runtimes and the SDK's TrainJobs
// run there unchanged, and allow hostPath volumes under ProcessHostPathRoot
// only, the shared initializer volume of examples/fashion-mnist/runtime.yaml
// (the e2e tests make their directories below it too).
const (
	// ProcessHostPathRoot is the one host directory the process nodes of the
	// local cluster allow hostPath volumes under.
	ProcessHostPathRoot = "/var/tmp/trainyard-initializer"
	ProcessPodCIDR      = "10.254.0.0/16"
	// ProcessHostAddress is the host on the pods' bridge: pods reach the
	// manager's status server there (the serving certificate names it).
	ProcessHostAddress = "10.254.255.254"
	processNodeFmt     = "process-node-%d"
)

// ProcessNodeName is the Node name of process node i.
func ProcessNodeName(i int) string { return fmt.Sprintf(processNodeFmt, i) }

// ProcessNodeLog is the agent log of process node i.
func (c *Cluster) ProcessNodeLog(i int) string {
	return c.LogFile(fmt.Sprintf("%s-%d", ProcessNode, i))
}

// ProcessNodeStateDir is where process node i keeps its pods' files and logs.
func (c *Cluster) ProcessNodeStateDir(i int) string {
	return filepath.Join(c.o.StateDir, "process-nodes", fmt.Sprint(i))
}

func (c *Cluster) processNodeArgs(i int) []string {
	args := []string{c.o.ProcessNodeBinary,
		"--kubeconfig=" + c.Kubeconfig(),
		"--node-name=" + ProcessNodeName(i),
		"--state-dir=" + c.ProcessNodeStateDir(i),
		"--tls-cert-file=" + c.pki.servingCert(), "--tls-private-key-file=" + c.pki.servingKey(),
		"--client-ca-file=" + c.pki.caCert(),
		fmt.Sprintf("--pod-cidr=10.254.%d.0/24", i),
		"--cluster-pod-cidr=" + ProcessPodCIDR,
		"--bridge=" + processnode.DefaultBridge(c.o.StateDir),
		"--host-address=" + ProcessHostAddress,
		"--register-taint=false",
		"--allowed-host-paths=" + ProcessHostPathRoot,
	}
	if c.o.ProcessNodeNvidiaSMI != "" {
		args = append(args, "--nvidia-smi="+c.o.ProcessNodeNvidiaSMI)
	}
	return args
}

// startProcessNodes starts the agents; Up waits for their Nodes to be Ready.
func (c *Cluster) startProcessNodes() error {
	if c.o.ProcessNodes > 250 {
		return fmt.Errorf("at most 250 process nodes")
	}
	for i := 0; i < c.o.ProcessNodes; i++ {
		// SIGTERM when the caller dies: the agent then ends its pods and removes
		// their namespaces, veths and the bridge.
		if _, err := c.sup.startWith(fmt.Sprintf("%s-%d", ProcessNode, i), c.processNodeArgs(i), false, syscall.SIGTERM); err != nil {
			return err
		}
	}
	return nil
}

// RestartProcessNode stops the agent of process node i with sig and starts it
// again with the same arguments, returning once the new agent has registered
// the node. SIGKILL is a crash: the pods' processes die with the agent while
// the API server still has them running, and the new agent runs them again;
// SIGTERM lets the agent end its pods first.
func (c *Cluster) RestartProcessNode(ctx context.Context, i int, sig syscall.Signal) error {
	name := fmt.Sprintf("%s-%d", ProcessNode, i)
	p, ok := c.sup.find(name)
	if !ok {
		return fmt.Errorf("process node %d is not running", i)
	}
	if err := c.sup.stop(p, sig, stopGrace); err != nil {
		return err
	}
	// The new agent appends to the same log; only what it writes counts.
	var from int64
	if st, err := os.Stat(c.ProcessNodeLog(i)); err == nil {
		from = st.Size()
	}
	if _, err := c.sup.startWith(name, c.processNodeArgs(i), false, syscall.SIGTERM); err != nil {
		return err
	}
	registered := fmt.Sprintf("node %s registered", ProcessNodeName(i))
	return c.poll(ctx, "process node "+ProcessNodeName(i)+" to register again", func() (bool, string, error) {
		b, err := os.ReadFile(c.ProcessNodeLog(i))
		if err != nil || int64(len(b)) < from {
			return false, "", err
		}
		return strings.Contains(string(b[from:]), registered), "not yet: see " + c.ProcessNodeLog(i), nil
	})
}
