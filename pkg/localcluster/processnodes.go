package localcluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// Process nodes: each runs the trainyard-node agent (pkg/processnode) with a
// node's credential, as a kubelet does: a client certificate of
// system:node:<name> in group system:nodes, which the API server's Node
// authorizer and NodeRestriction confine to what a node may do for its own
// pods (every pod of a process node runs as root on this host and can read
// what the agent can), and the ClusterRole processnode.ClusterRoleName for
// its pods' hosts files. Its kubelet API (container logs) is served on a free
// port of 127.0.0.1 with a serving certificate of its own and requires a client
// certificate of the cluster CA, which the API server presents
// (--kubelet-client-certificate). The credentials of node i are in
// StateDir/process-nodes/credentials/<i> (0700), outside every directory a pod
// may mount. All process nodes' pods share one bridge, named after the state
// directory, and one /16; node i hands out 10.254.i.0/24.
//
// The local cluster has one user: its process nodes are untainted
// (--register-taint=false), so that Kubeflow's runtimes and the SDK's TrainJobs
// run there unchanged, and allow hostPath volumes under ProcessHostPathRoot
// only, the shared initializer volume of examples/fashion-mnist/runtime.yaml
// (the e2e tests make their directories below it too). That root is in the
// cluster's state directory, made by Up and root's, so that no other local
// user can make it first (as under /var/tmp they could); the runtime's
// hostPath is pointed there when Up installs it.
const (
	ProcessPodCIDR = "10.254.0.0/16"
	// ProcessHostAddress is the host on the pods' bridge: pods reach the
	// manager's status server there (the serving certificate names it).
	ProcessHostAddress = "10.254.255.254"
	processNodeFmt     = "process-node-%d"
	// fashionHostPath is the hostPath of FashionMNISTRuntimeFile, which Up
	// replaces with ProcessHostPathRoot.
	fashionHostPath = "/var/tmp/trainyard-initializer"
)

// ProcessHostPathRoot is the one host directory the process nodes of the
// cluster allow hostPath volumes under.
func (c *Cluster) ProcessHostPathRoot() string {
	return filepath.Join(c.o.StateDir, "process-nodes", "host-paths", "trainyard-initializer")
}

// processNodeCredentials is where node i's credentials are.
func (c *Cluster) processNodeCredentials(i int) string {
	return filepath.Join(c.o.StateDir, "process-nodes", "credentials", fmt.Sprint(i))
}

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
	creds := c.processNodeCredentials(i)
	args := []string{c.o.ProcessNodeBinary,
		"--kubeconfig=" + filepath.Join(creds, "kubeconfig"),
		"--node-name=" + ProcessNodeName(i),
		"--state-dir=" + c.ProcessNodeStateDir(i),
		"--tls-cert-file=" + filepath.Join(creds, "serving.crt"), "--tls-private-key-file=" + filepath.Join(creds, "serving.key"),
		"--client-ca-file=" + c.pki.caCert(),
		fmt.Sprintf("--pod-cidr=10.254.%d.0/24", i),
		"--cluster-pod-cidr=" + ProcessPodCIDR,
		"--bridge=" + processnode.DefaultBridge(c.o.StateDir),
		"--host-address=" + ProcessHostAddress,
		"--register-taint=false",
		"--allowed-host-paths=" + c.ProcessHostPathRoot(),
	}
	if c.o.ProcessNodeNvidiaSMI != "" {
		args = append(args, "--nvidia-smi="+c.o.ProcessNodeNvidiaSMI)
	}
	return args
}

// startProcessNodes gives the agents their credentials, RBAC and host path
// root, and starts them; Up waits for their Nodes to be Ready.
func (c *Cluster) startProcessNodes(ctx context.Context) error {
	if c.o.ProcessNodes > 250 {
		return fmt.Errorf("at most 250 process nodes")
	}
	if c.o.ProcessNodes == 0 {
		return nil
	}
	var names []string
	for i := 0; i < c.o.ProcessNodes; i++ {
		if err := c.writeProcessNodeCredentials(i); err != nil {
			return fmt.Errorf("process node %d: %w", i, err)
		}
		names = append(names, ProcessNodeName(i))
	}
	for _, o := range []client.Object{processnode.ClusterRole(), processnode.ClusterRoleBinding(names...)} {
		if err := c.client.Create(ctx, o); err != nil {
			return fmt.Errorf("process nodes' RBAC: %w", err)
		}
	}
	if err := os.MkdirAll(c.ProcessHostPathRoot(), 0o755); err != nil {
		return err
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

// writeProcessNodeCredentials writes node i's client certificate (a node's:
// system:node:<name>, system:nodes), its kubeconfig and the serving
// certificate of its kubelet API, readable by root only.
func (c *Cluster) writeProcessNodeCredentials(i int) error {
	dir := c.processNodeCredentials(i)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	name := ProcessNodeName(i)
	crt, key := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := c.pki.issue(crt, key, pkix.Name{CommonName: processnode.NodeUser(name), Organization: []string{processnode.NodesGroup}},
		x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return fmt.Errorf("client certificate: %w", err)
	}
	if err := c.writeNodeKubeconfig(filepath.Join(dir, "kubeconfig"), crt, key); err != nil {
		return err
	}
	if err := c.pki.issue(filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key"), pkix.Name{CommonName: name},
		x509.ExtKeyUsageServerAuth, []string{"localhost", name}, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
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
