package cluster

import (
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// Process nodes: each runs the trainyard-node agent (pkg/processnode) with the
// admin kubeconfig. Its kubelet API (container logs) is served on a free port of
// 127.0.0.1 with the cluster's serving certificate and requires a client
// certificate of the cluster CA, which the API server presents
// (--kubelet-client-certificate). All process nodes' pods share one bridge,
// named after the state directory, and one /16; node i hands out 10.254.i.0/24.
const (
	ProcessPodCIDR = "10.254.0.0/16"
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
	return []string{c.o.ProcessNodeBinary,
		"--kubeconfig=" + c.Kubeconfig(),
		"--node-name=" + ProcessNodeName(i),
		"--state-dir=" + c.ProcessNodeStateDir(i),
		"--tls-cert-file=" + c.pki.servingCert(), "--tls-private-key-file=" + c.pki.servingKey(),
		"--client-ca-file=" + c.pki.caCert(),
		fmt.Sprintf("--pod-cidr=10.254.%d.0/24", i),
		"--cluster-pod-cidr=" + ProcessPodCIDR,
		"--bridge=" + processnode.DefaultBridge(c.o.StateDir),
		"--host-address=" + ProcessHostAddress,
	}
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
