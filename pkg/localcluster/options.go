package localcluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// Options configure a cluster. Only StateDir is required.
type Options struct {
	// StateDir holds everything the cluster writes. It is created if needed; a
	// previous cluster's files in it are replaced (Up refuses while one still runs).
	StateDir string
	// RepoDir is the root of the trainyard module; default: found upwards from the
	// working directory.
	RepoDir string
	// BinDir holds etcd, kube-*, kwok, jobset-controller, kueue-controller (and
	// kubectl, which the cluster does not run); default RepoDir/bin/k8s.
	BinDir string
	// ManagerBinary is the Trainyard manager; default RepoDir/bin/trainyard-manager.
	ManagerBinary string
	// CPUNodes and GPUNodes are the numbers of kwok nodes of each pool; when both are
	// 0 (and ProcessNodes and ContainerNodes too) the defaults are 2 CPU nodes and 1 GPU node.
	// GPUsPerNode defaults to 8.
	CPUNodes, GPUNodes, GPUsPerNode int
	// ProcessNodes is the number of process nodes (process-node-0, …): Nodes whose
	// pods really run, as processes on this machine (see ProcessNodeBinary and
	// pkg/processnode). They are labelled trainyard.io/pool=process and untainted.
	ProcessNodes int
	// ContainerNodes is the number of container nodes (container-node-0, …):
	// real kubelets, each with its own containerd, whose pods run in real
	// containers (containernode.go), with kube-proxy and CoreDNS for the
	// host (containernode_network.go) and a default StorageClass
	// (containernode_storage.go). They need bin/k8s/kubelet, kube-proxy,
	// coredns and provisioner (test/tools/build.sh bin/k8s kubelet
	// kube-proxy coredns provisioner) and the packages of
	// pkg/localcluster/packages/container-node-packages.sh (InstallContainerNodePackages). Default 0.
	ContainerNodes int
	// ProcessNodeBinary is the process node agent; default RepoDir/bin/trainyard-node.
	ProcessNodeBinary string
	// ProcessNodeNvidiaSMI is the process nodes' --nvidia-smi, the program
	// that lists the GPUs they advertise (tests give a fake one); "" leaves
	// the agent's default, nvidia-smi if the machine has one.
	ProcessNodeNvidiaSMI string
	// NoKueue runs no Kueue: no kueue-controller, and none of its CRDs, webhook
	// configurations or namespace (make run's guide queues nothing, so it needs
	// none of it, nor the build of it). The manager runs as on a cluster without
	// Kueue.
	NoKueue bool
	// KueueFrameworks are Kueue's integrations.frameworks; nil means DefaultKueueFrameworks.
	KueueFrameworks []string
	// KueueConcurrency, when positive, is the number of workers of Kueue's TrainJob
	// and JobSet integrations (controller.groupKindConcurrency; Kueue's manifests set
	// none for them, so each has one).
	KueueConcurrency int
	// ExternalManager runs no manager process: the cluster installs none of
	// Trainyard (no CRDs, webhook configurations, runtimes, user roles or
	// version ConfigMap), so that a test installs it as it is deployed (the
	// chart or a kustomize overlay, the manager as a Deployment on container
	// nodes: test/deployed_e2e). ManagerBinary, ManagerArgs, ManagerReplicas
	// and Runtimes are then unused, and the manager's methods fail.
	ExternalManager bool
	// ManagerArgs are appended to the manager's command line.
	ManagerArgs []string
	// Runtimes are YAML files applied once the manager is ready; nil means
	// LocalRuntimes (runtimes/*.yaml and the Fashion-MNIST runtime of make
	// run). Use an empty non-nil slice for none.
	Runtimes []string
	// Scheme is the scheme of Client(); default: Scheme().
	Scheme *runtime.Scheme
	// Detach lets the components outlive the calling process, as `trainyard-local up`
	// needs. By default they are killed (SIGKILL) when the calling process dies, so
	// that a crashed or timed-out test binary leaves nothing running; call Down to
	// stop them in order.
	Detach bool
	// UntaintedNodes creates the kwok nodes without kwok's NoSchedule taint, so that
	// workloads without the KwokToleration (e.g. the examples) schedule on them. By
	// default the nodes carry the taint, as kwok documents its fake nodes.
	UntaintedNodes bool
	// PodsPerNode is the pod capacity of each kwok node; default 110, as a kubelet's.
	PodsPerNode int
	// AuditLog makes the API server write an audit log (JSON, Metadata level, one
	// line per completed request) to AuditLogFile(), e.g. to count a component's
	// requests by verb and resource.
	AuditLog bool
	// DisableQPSLimits lifts the client-side rate limits of kube-controller-manager,
	// kube-scheduler (as kwokctl's option of the same name does), Kueue and the gang
	// schedulers, so that a scale test measures the API server and the controller
	// under test rather than the Job controller's (or Kueue's) 20 requests per second.
	DisableQPSLimits bool
	// Profiling serves the API server's /debug/pprof (its --profiling; off by
	// default here) and each manager replica's (--pprof-bind-address on a
	// loopback port: ManagerPprofURL), e.g. to CPU-profile them under a
	// benchmark's burst.
	Profiling bool
	// ManagerReplicas is the number of manager replicas (default 1), all with
	// leader election; see ManagerReplica. More than one needs Detach false.
	ManagerReplicas int
	// Bare runs only etcd, the API server, the CRDs and the manager, with its
	// webhooks off: no kube-controller-manager, scheduler, kwok nodes, JobSet,
	// Kueue or webhook configurations. Nothing runs pods or deletes what a
	// namespace holds; it measures the manager against the API server alone
	// (make bench's -bare variant). Pass --enable-webhooks=false in ManagerArgs.
	Bare bool
	// GangScheduler also starts a gang scheduler (GangSchedulerVolcano, ...); "" none.
	GangScheduler string
	// ReadyTimeout bounds the wait for each component; default 3 minutes.
	ReadyTimeout time.Duration
	// Progress, when set, receives one line per step.
	Progress io.Writer
}

// Gang schedulers (Options.GangScheduler).
const (
	GangSchedulerCoscheduling = "coscheduling"
	GangSchedulerVolcano      = "volcano"
)

// Binaries returns the paths of every binary a cluster with these options runs:
// what Up checks before it starts, and what `trainyard-local run -tools` tells
// make run to build (nothing else).
func Binaries(o Options) ([]string, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	var bins []string
	for _, b := range []string{Etcd, APIServer, ControllerManager, Scheduler, JobSet} {
		bins = append(bins, filepath.Join(o.BinDir, b))
	}
	if o.kwokNodes() > 0 {
		bins = append(bins, filepath.Join(o.BinDir, Kwok))
	}
	if !o.NoKueue {
		bins = append(bins, filepath.Join(o.BinDir, Kueue))
	}
	if !o.ExternalManager {
		bins = append(bins, o.ManagerBinary)
	}
	if o.GangScheduler == GangSchedulerVolcano {
		bins = append(bins, volcanoBinaries(o)...)
	}
	if o.GangScheduler == GangSchedulerCoscheduling {
		bins = append(bins, coschedulingBinaries(o)...)
	}
	if o.ProcessNodes > 0 {
		bins = append(bins, o.ProcessNodeBinary)
	}
	if o.ContainerNodes > 0 {
		bins = append(bins, filepath.Join(o.BinDir, Kubelet), filepath.Join(o.BinDir, KubeProxy), filepath.Join(o.BinDir, CoreDNS),
			filepath.Join(o.BinDir, Provisioner))
	}
	return bins, nil
}

// MissingBinaries lists the binaries Up needs that do not exist (run `make cluster-tools`).
func MissingBinaries(o Options) ([]string, error) {
	bins, err := Binaries(o)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, b := range bins {
		if st, err := os.Stat(b); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing, nil
}

// FindRepoDir returns the root of the trainyard module, searching upwards from dir.
func FindRepoDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && firstModuleLine(string(b)) == "module github.com/trainyard/trainyard" {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no github.com/trainyard/trainyard go.mod above %s", dir)
		}
	}
}

func firstModuleLine(gomod string) string {
	for _, l := range strings.Split(gomod, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "module ") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func (o *Options) defaults() error {
	if o.RepoDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if o.RepoDir, err = FindRepoDir(wd); err != nil {
			return err
		}
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RepoDir, "bin", "k8s")
	}
	if o.ManagerBinary == "" {
		o.ManagerBinary = filepath.Join(o.RepoDir, "bin", "trainyard-manager")
	}
	if o.ProcessNodeBinary == "" {
		o.ProcessNodeBinary = filepath.Join(o.RepoDir, "bin", "trainyard-node")
	}
	if o.CPUNodes == 0 && o.GPUNodes == 0 && o.ProcessNodes == 0 && o.ContainerNodes == 0 {
		o.CPUNodes, o.GPUNodes = defaultCPUNode, defaultGPUNode
	}
	if o.GPUsPerNode == 0 {
		o.GPUsPerNode = defaultGPUs
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = defaultPodsPerNode
	}
	if o.KueueFrameworks == nil {
		o.KueueFrameworks = slices.Clone(DefaultKueueFrameworks)
	}
	if o.Runtimes == nil && o.ExternalManager {
		o.Runtimes = []string{}
	}
	if o.Runtimes == nil {
		rs, err := LocalRuntimes(o.RepoDir)
		if err != nil {
			return err
		}
		o.Runtimes = rs
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 3 * time.Minute
	}
	for _, p := range []*string{&o.RepoDir, &o.BinDir, &o.ManagerBinary, &o.ProcessNodeBinary} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if o.StateDir != "" {
		abs, err := filepath.Abs(o.StateDir)
		if err != nil {
			return err
		}
		o.StateDir = abs
	}
	return nil
}

// kwokNodes is the number of kwok nodes: kwok runs only for them.
func (o Options) kwokNodes() int { return o.CPUNodes + o.GPUNodes }

// readyMessage is the progress line of a cluster that is up: what it installed.
func (o Options) readyMessage() string {
	if o.ExternalManager {
		return fmt.Sprintf("cluster ready without the manager (no Trainyard CRDs, webhooks or users' roles: install the chart or an overlay), %d runtimes installed, nodes Ready", len(o.Runtimes))
	}
	return fmt.Sprintf("cluster ready: %d runtimes and the users' roles installed, nodes Ready", len(o.Runtimes))
}
