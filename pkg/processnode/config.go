package processnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// Labels of a process node.
const (
	PoolLabel        = "trainyard.io/pool"
	PoolProcess      = "process"
	ProcessNodeLabel = "trainyard.io/process-node"
)

// Config configures an agent.
type Config struct {
	// NodeName is the Node the agent registers and runs the pods of.
	NodeName string
	// RESTConfig reaches the API server.
	RESTConfig *rest.Config
	// StateDir holds everything the agent writes: per pod its volumes, hosts file,
	// sandbox spec and logs (StateDir/pods/NS_NAME_UID).
	StateDir string
	// ListenAddress and Port are where the kubelet API (container logs) is served
	// over HTTPS; Port 0 picks a free port. The Node advertises HostIP and the port.
	ListenAddress string
	Port          int
	HostIP        string
	// TLSCertFile and TLSKeyFile are the serving certificate of the kubelet API;
	// ClientCAFile verifies the client certificates it requires (the API server's
	// kubelet client certificate, or an admin's).
	TLSCertFile, TLSKeyFile, ClientCAFile string
	// Bridge is the Linux bridge of the pods; default DefaultBridge(StateDir).
	// Process nodes of one cluster share it.
	Bridge string
	// PodCIDR is this node's pod address range, inside ClusterPodCIDR (default:
	// PodCIDR), the subnet of all process nodes' pods on the bridge.
	PodCIDR, ClusterPodCIDR string
	// CPUOvercommit multiplies the host's CPUs in the Node's capacity (default
	// DefaultCPUOvercommit). Pods get no CPU limits here, so the capacity is
	// only the scheduler's budget: overcommitting lets the pods of a TrainJob
	// that asks for more CPUs than the machine has (the guide's 2 nodes x
	// cpu=2 on a 2-core machine) all start, sharing the cores, rather than
	// leave some Pending; 1 advertises the real count.
	CPUOvercommit float64
	// HostAddress, when set, is given to the bridge (with the cluster pod
	// range's prefix) and pods route through it to the host's other IPv4
	// addresses (as the agent starts), so that pods reach services of the
	// host at any of its addresses, and nothing beyond the host: a local
	// cluster's manager runs on the host, and trainers report their progress
	// to its status server (at the node IP when the cluster has container
	// nodes). Empty: pods reach nothing beyond each other.
	HostAddress string
	// Labels and Taints are added to the Node's. Unless Untainted, Taints
	// gets ProcessNodeTaint. A pod bound to the node that does not tolerate
	// every NoSchedule and NoExecute taint of Taints fails
	// (ReasonTaintNotTolerated) before anything of it runs.
	Labels map[string]string
	Taints []corev1.Taint
	// Untainted registers the Node without ProcessNodeTaint: for a cluster of
	// one user (the local cluster of make run), where upstream runtimes and
	// the SDK's TrainJobs, which tolerate no such taint, must run unchanged.
	// The node runs pods as root on its host: on a cluster others use, keep
	// the taint, so that only pods that ask for this node land on it.
	Untainted bool
	// AcceptWildcardTolerations counts a toleration of every taint (operator
	// Exists without a key) as tolerating the node's taints. By default it
	// does not: any DaemonSet that tolerates everything would land here and
	// run as root on this host; a pod must name the taint's key.
	AcceptWildcardTolerations bool
	// AllowedHostPaths are the host directories under which hostPath volumes
	// may lie (after symlinks are resolved): a pod with a hostPath anywhere
	// else fails (ReasonHostPathNotAllowed). Empty: no hostPath is allowed.
	// Each must be the node's own: not a symlink, owned by root (or this
	// user), writable by no one else, below directories no one else may
	// rename into (checkHostPathRoot; made 0755 when missing), and it must not
	// hold the state directory or a credential file.
	AllowedHostPaths []string
	// CredentialFiles are the agent's credentials on this host (its
	// kubeconfig and the files it names, the kubelet API's key): no allowed
	// host path may hold one, and every pod's mount namespace hides them
	// (an empty file mounted over each).
	CredentialFiles []string
	// AllowPrivilegedCredentials runs the agent with a credential that can do
	// more than a node's (checkIdentity), loudly. By default the agent refuses:
	// every pod it runs can take its credential.
	AllowPrivilegedCredentials bool
	// BackoffBase and BackoffMax bound the crash-loop back-off (defaults 10s, 5m).
	BackoffBase, BackoffMax time.Duration
	// SandboxBinary is started as each pod's sandbox with SandboxEnv set; it must
	// call RunSandboxIfRequested first. Default: this executable.
	SandboxBinary string
	// ShutdownGrace bounds the grace period of the pods when the agent stops (default 5s).
	ShutdownGrace time.Duration
	// DefaultEnv is set in every container's environment before its own
	// variables (a container's value wins): what the host's software needs to
	// run upstream-shaped pods unchanged (see DetectHostQuirks).
	DefaultEnv []corev1.EnvVar
	// NvidiaSMI lists the host's GPUs (see gpu.go): default nvidia-smi on
	// PATH, else DefaultNvidiaSMI, and no GPUs when neither is there;
	// NoNvidiaSMI turns discovery off. A path set here must work.
	NvidiaSMI string
	// KeepRoots keeps each container's root directory (its working directory
	// when it names none, see doc.go) after its pod is gone, under
	// StateDir/kept-roots, for debugging; by default it goes with the pod.
	KeepRoots bool
	// Logf receives the agent's log lines; default: stderr.
	Logf func(format string, args ...interface{})
}

// DefaultCPUOvercommit is how many CPUs a process node advertises per host CPU.
const DefaultCPUOvercommit = 4

// DefaultPodCIDR is the pod range of a single process node.
const DefaultPodCIDR = "10.254.0.0/24"

func (c *Config) defaults() error {
	if c.NodeName == "" {
		return errors.New("processnode: NodeName is required")
	}
	if c.RESTConfig == nil {
		return errors.New("processnode: RESTConfig is required")
	}
	if c.StateDir == "" {
		return errors.New("processnode: StateDir is required")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return err
	}
	c.StateDir = abs
	if c.ListenAddress == "" {
		c.ListenAddress = "127.0.0.1"
	}
	if c.HostIP == "" {
		c.HostIP = "127.0.0.1"
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge(c.StateDir)
	}
	if c.PodCIDR == "" {
		c.PodCIDR = DefaultPodCIDR
	}
	if c.ClusterPodCIDR == "" {
		c.ClusterPodCIDR = c.PodCIDR
	}
	if !c.Untainted && !hasTaint(c.Taints, ProcessNodeTaint) {
		c.Taints = append(append([]corev1.Taint(nil), c.Taints...), ProcessNodeTaint)
	}
	for i, f := range c.CredentialFiles {
		if c.CredentialFiles[i], err = filepath.Abs(f); err != nil {
			return err
		}
	}
	roots, err := cleanHostPathRoots(c.AllowedHostPaths, append([]string{c.StateDir}, c.CredentialFiles...))
	if err != nil {
		return err
	}
	c.AllowedHostPaths = roots
	if c.CPUOvercommit == 0 {
		c.CPUOvercommit = DefaultCPUOvercommit
	}
	if c.CPUOvercommit < 0 {
		return fmt.Errorf("processnode: CPUOvercommit %v must be positive", c.CPUOvercommit)
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.SandboxBinary == "" {
		if c.SandboxBinary, err = os.Executable(); err != nil {
			return err
		}
	}
	if c.Logf == nil {
		c.Logf = func(format string, args ...interface{}) {
			fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		}
	}
	if c.TLSCertFile == "" || c.TLSKeyFile == "" || c.ClientCAFile == "" {
		return errors.New("processnode: TLSCertFile, TLSKeyFile and ClientCAFile are required (the kubelet API is served over HTTPS with client certificates)")
	}
	return nil
}
