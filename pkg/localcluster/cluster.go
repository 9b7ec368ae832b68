// Package localcluster runs a local Kubernetes cluster for Trainyard's end-to-end tests and
// for people: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok fake
// nodes (CPU and GPU), optionally process nodes (pods really run, as processes of
// this machine: pkg/processnode), the JobSet controller, the Kueue controller and
// the Trainyard manager, each as a plain process on 127.0.0.1, with the webhooks of
// the three controllers registered by URL.
//
// The binaries are built from Go modules by test/tools/build.sh (`make cluster-tools`).
// Everything a cluster writes lives in its state directory: PKI, etcd data, configs,
// logs, the kubeconfig and state.json, which records the processes so that another
// process can stop them (DownStateDir, `trainyard-local down`).
//
// Kueue (v0.16.1 and v0.17.1) insists on reading a metrics certificate from /etc/kueue/metrics/certs
// when it does not manage its own certificates. It is therefore started in a private
// mount namespace with a tmpfs-backed overlay on /etc that holds that file; the host's
// /etc is not touched. This needs root (CAP_SYS_ADMIN).
package localcluster

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
)

// Component names: the log file of component X is Logs()/X.log.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kwok              = "kwok"
	JobSet            = "jobset-controller"
	Kueue             = "kueue-controller"
	Manager           = "trainyard-manager"
	// ProcessNode is the agent of a process node; the log of process node i is
	// Logs()/trainyard-node-<i>.log.
	ProcessNode = "trainyard-node"
)

// Namespaces the cluster creates.
const (
	KueueNamespace   = "kueue-system"
	ManagerNamespace = "trainyard-system"
)

// Node labels, annotation and taint of the kwok nodes. Pods need KwokToleration.
const (
	PoolLabel          = "trainyard.io/pool" // "cpu" or "gpu"
	KwokNodeKey        = "kwok.x-k8s.io/node"
	KwokNodeValue      = "fake"
	GPUResource        = "nvidia.com/gpu"
	fieldManager       = "trainyard-local-cluster"
	defaultCPUNode     = 2
	defaultGPUNode     = 1
	defaultGPUs        = 8
	defaultPodsPerNode = 110
)

// KwokToleration lets a pod run on the kwok nodes.
var KwokToleration = corev1.Toleration{Key: KwokNodeKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// DefaultKueueFrameworks are Kueue's integrations.frameworks unless Options say otherwise.
var DefaultKueueFrameworks = []string{"batch/job", "jobset.x-k8s.io/jobset", kueueTrainJobFramework}

// kueueTrainJobFramework is Kueue's TrainJob integration.
const kueueTrainJobFramework = "trainer.kubeflow.org/trainjob"

// KueueFrameworksFor are Kueue's integrations for the manager's --kueue-mode:
// the defaults, without the TrainJob integration in jobset mode (Kueue then
// queues the JobSets Trainyard hands it; docs/install.md).
func KueueFrameworksFor(mode kueue.Mode) []string {
	fw := slices.Clone(DefaultKueueFrameworks)
	if mode == kueue.ModeJobSet {
		fw = slices.DeleteFunc(fw, func(f string) bool { return f == kueueTrainJobFramework })
	}
	return fw
}

// Cluster is a running local cluster.
type Cluster struct {
	o     Options
	pki   pki
	sup   *supervisor
	ports Ports

	restConfig *rest.Config
	client     client.Client

	kueueDir, jobsetDir, kwokDir string // module directories (CRDs, manifests, stages)
	crds                         []*unstructured.Unstructured

	mu              sync.Mutex
	webhookConfigs  map[string][]*unstructured.Unstructured // component -> its webhook configurations
	kueueFrameworks []string
	progressStart   time.Time

	replicas []replicaPorts // manager replicas' ports; [0] is Manager's
	proxy    net.Listener   // the webhook proxy, with more than one replica

	nodeIP string // with container nodes: the host's default-route IP, theirs and the API server's
}

// Kubeconfig returns the path of the admin kubeconfig (StateDir/kubeconfig).
func (c *Cluster) Kubeconfig() string { return kubeconfigPath(c.o.StateDir) }

// RESTConfig returns a client configuration for the admin user.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client returns a controller-runtime client for the admin user, with
// Options.Scheme (default: Scheme()); use unstructured objects for other kinds,
// e.g. Kueue's.
func (c *Cluster) Client() client.Client { return c.client }

// Ports returns the loopback ports the components listen on.
func (c *Cluster) Ports() Ports { return c.ports }

// StateDir returns the state directory.
func (c *Cluster) StateDir() string { return c.o.StateDir }

// Logs returns the directory of the component logs (one NAME.log per component;
// restarts append to the same file).
func (c *Cluster) Logs() string { return filepath.Join(c.o.StateDir, "logs") }

// LogFile returns the log file of a component (one of the component name constants).
func (c *Cluster) LogFile(component string) string { return filepath.Join(c.Logs(), component+".log") }

// Processes returns the running components, oldest first.
func (c *Cluster) Processes() []Process {
	c.sup.mu.Lock()
	defer c.sup.mu.Unlock()
	ps := slices.Clone(c.sup.st.Processes)
	slices.SortFunc(ps, func(a, b Process) int { return a.Seq - b.Seq })
	return ps
}

// KueueFrameworks returns the integrations Kueue currently runs with.
func (c *Cluster) KueueFrameworks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.kueueFrameworks)
}

func kubeconfigPath(stateDir string) string { return filepath.Join(stateDir, "kubeconfig") }

func (c *Cluster) progress(format string, args ...interface{}) {
	if c.o.Progress == nil {
		return
	}
	fmt.Fprintf(c.o.Progress, "[%5.1fs] %s\n", time.Since(c.progressStart).Seconds(), fmt.Sprintf(format, args...))
}
