// Package cluster runs a local Kubernetes cluster for Trainyard's end-to-end tests and
// for people: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok fake
// nodes (CPU and GPU), optionally process nodes (pods really run, as processes of
// this machine: pkg/processnode), the JobSet controller, the Kueue controller and
// the Trainyard manager, each as a plain process on 127.0.0.1, with the webhooks of
// the three controllers registered by URL.
//
// The binaries are built from Go modules by test/tools/build.sh (`make cluster-tools`).
// Everything a cluster writes lives in its state directory: PKI, etcd data, configs,
// logs, the kubeconfig and state.json, which records the processes so that another
// process can stop them (DownStateDir, `local-cluster down`).
//
// Kueue v0.16.1 insists on reading a metrics certificate from /etc/kueue/metrics/certs
// when it does not manage its own certificates. It is therefore started in a private
// mount namespace with a tmpfs-backed overlay on /etc that holds that file; the host's
// /etc is not touched. This needs root (CAP_SYS_ADMIN).
package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
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
var DefaultKueueFrameworks = []string{"batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"}

// Options configure a cluster. Only StateDir is required.
type Options struct {
	// StateDir holds everything the cluster writes. It is created if needed; a
	// previous cluster's files in it are replaced (Up refuses while one still runs).
	StateDir string
	// RepoDir is the root of the trainyard module; default: found upwards from the
	// working directory.
	RepoDir string
	// BinDir holds etcd, kube-*, kubectl, kwok, jobset-controller, kueue-controller;
	// default RepoDir/bin/k8s.
	BinDir string
	// ManagerBinary is the Trainyard manager; default RepoDir/bin/trainyard-manager.
	ManagerBinary string
	// CPUNodes and GPUNodes are the numbers of kwok nodes of each pool; when both are
	// 0 (and ProcessNodes too) the defaults are 2 CPU nodes and 1 GPU node.
	// GPUsPerNode defaults to 8.
	CPUNodes, GPUNodes, GPUsPerNode int
	// ProcessNodes is the number of process nodes (process-node-0, …): Nodes whose
	// pods really run, as processes on this machine (see ProcessNodeBinary and
	// pkg/processnode). They are labelled trainyard.io/pool=process and untainted.
	ProcessNodes int
	// ProcessNodeBinary is the process node agent; default RepoDir/bin/trainyard-node.
	ProcessNodeBinary string
	// KueueFrameworks are Kueue's integrations.frameworks; nil means DefaultKueueFrameworks.
	KueueFrameworks []string
	// ManagerArgs are appended to the manager's command line.
	ManagerArgs []string
	// Runtimes are YAML files applied once the manager is ready; nil means
	// RepoDir/runtimes/*.yaml. Use an empty non-nil slice for none.
	Runtimes []string
	// Scheme is the scheme of Client(); default: Scheme().
	Scheme *runtime.Scheme
	// Detach lets the components outlive the calling process, as `local-cluster up`
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
	// DisableQPSLimits lifts the client-side rate limits of kube-controller-manager
	// and kube-scheduler (as kwokctl's option of the same name does), so that a
	// scale test measures the API server and the controller under test rather
	// than the Job controller's default 20 requests per second.
	DisableQPSLimits bool
	// ManagerReplicas is the number of manager replicas (default 1), all with
	// leader election; see ManagerReplica. More than one needs Detach false.
	ManagerReplicas int
	// ReadyTimeout bounds the wait for each component; default 3 minutes.
	ReadyTimeout time.Duration
	// Progress, when set, receives one line per step.
	Progress io.Writer
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

// Binaries returns the paths of every binary a cluster with these options runs.
func Binaries(o Options) ([]string, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	var bins []string
	for _, b := range []string{Etcd, APIServer, ControllerManager, Scheduler, "kubectl", Kwok, JobSet, Kueue} {
		bins = append(bins, filepath.Join(o.BinDir, b))
	}
	bins = append(bins, o.ManagerBinary)
	if o.ProcessNodes > 0 {
		bins = append(bins, o.ProcessNodeBinary)
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
	if o.CPUNodes == 0 && o.GPUNodes == 0 && o.ProcessNodes == 0 {
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
	if o.Runtimes == nil {
		rs, err := filepath.Glob(filepath.Join(o.RepoDir, "runtimes", "*.yaml"))
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

// Entries of a state directory that Up (re)creates; nothing else in it is touched.
var stateEntries = []string{"state.json", "state.json.tmp", "kubeconfig", "pki", "etcd", "logs", "config", "manifests", "home", "certs", "kueue-mnt", "process-nodes"}

// Up starts a cluster and returns once every component is ready, the kwok nodes are
// Ready, every webhook configuration is registered and the runtimes are installed.
// ctx bounds the start only: the processes keep running until Down.
func Up(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.StateDir == "" {
		return nil, errors.New("cluster: Options.StateDir is required")
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if strings.ContainsAny(o.StateDir, ",:") {
		return nil, fmt.Errorf("cluster: state directory %q must not contain ',' or ':' (used in mount options)", o.StateDir)
	}
	missing, err := MissingBinaries(o)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cluster: missing binaries (run `make cluster-tools`): %s", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("cluster: needs root, to give Kueue a private /etc overlay (see the package documentation)")
	}
	if st, err := readState(o.StateDir); err == nil {
		for _, p := range st.Processes {
			if procAlive(p.PID, p.StartTime) {
				return nil, fmt.Errorf("cluster: a cluster is still running in %s (%s pid %d); stop it first", o.StateDir, p.Name, p.PID)
			}
		}
	}
	for _, e := range stateEntries {
		if err := os.RemoveAll(filepath.Join(o.StateDir, e)); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"logs", "config", "manifests", "home", "certs", "kueue-mnt", "etcd"} {
		mode := os.FileMode(0o755)
		if d == "etcd" {
			mode = 0o700 // what etcd insists on
		}
		if err := os.MkdirAll(filepath.Join(o.StateDir, d), mode); err != nil {
			return nil, err
		}
	}

	c = &Cluster{
		o:               o,
		pki:             pki{dir: filepath.Join(o.StateDir, "pki")},
		webhookConfigs:  map[string][]*unstructured.Unstructured{},
		kueueFrameworks: slices.Clone(o.KueueFrameworks),
		progressStart:   time.Now(),
	}
	if c.ports, err = freePorts(); err != nil {
		return nil, err
	}
	if err := c.setUpReplicas(); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(o.StateDir, "home"), "KUBECONFIG=" + c.Kubeconfig()}
	c.sup = &supervisor{dir: o.StateDir, env: env, exits: map[int]chan struct{}{}, logf: c.progress, detach: o.Detach,
		st: &state{Ports: c.ports, KueueFrameworks: c.kueueFrameworks, ManagerArgs: o.ManagerArgs}}
	if err := writeState(o.StateDir, c.sup.st); err != nil {
		return nil, err
	}
	prepErr := make(chan error, 1)
	prepPending := false // the prepare goroutine runs and nobody waits for it yet
	defer func() {
		if err != nil {
			if prepPending {
				<-prepErr // let it finish before the caller may remove StateDir
			}
			c.progress("start failed, stopping: %v", err)
			if derr := c.sup.stopAll(); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()

	if err := c.pki.generate(); err != nil {
		return nil, fmt.Errorf("generating PKI: %w", err)
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	if c.o.AuditLog {
		if err := c.writeAuditPolicy(); err != nil {
			return nil, err
		}
	}
	c.progress("PKI and kubeconfig written")

	// While etcd and the API server start: find the module directories (CRDs,
	// webhook manifests, kwok stages; from the tool modules the binaries are built
	// from, so they always match the binaries) and render what they hold.
	prepPending = true
	go func() { prepErr <- c.prepare(ctx) }()

	// 1. etcd
	etcd, err := c.sup.start(Etcd, c.etcdArgs(), false)
	if err != nil {
		return nil, err
	}
	if err := c.waitHTTP(ctx, etcd, fmt.Sprintf("http://%s/health", loopback(c.ports.EtcdClient)), nil); err != nil {
		return nil, err
	}
	c.progress("etcd ready on %s", loopback(c.ports.EtcdClient))

	// 2. kube-apiserver
	api, err := c.sup.start(APIServer, c.apiserverArgs(), false)
	if err != nil {
		return nil, err
	}
	adminHTTP, err := c.httpsClient(true)
	if err != nil {
		return nil, err
	}
	if err := c.waitHTTP(ctx, api, fmt.Sprintf("https://%s/readyz", loopback(c.ports.APIServer)), adminHTTP); err != nil {
		return nil, err
	}
	c.progress("kube-apiserver ready on %s", loopback(c.ports.APIServer))
	if err := c.newClient(); err != nil {
		return nil, err
	}

	// 3. kube-controller-manager, kube-scheduler, kwok; nodes, namespaces, CRDs.
	prepPending = false
	if err := <-prepErr; err != nil {
		return nil, err
	}
	kcm, err := c.sup.start(ControllerManager, c.controllerManagerArgs(), false)
	if err != nil {
		return nil, err
	}
	sched, err := c.sup.start(Scheduler, c.schedulerArgs(), false)
	if err != nil {
		return nil, err
	}
	if _, err := c.sup.start(Kwok, c.kwokArgs(), false); err != nil {
		return nil, err
	}
	if err := c.startProcessNodes(); err != nil {
		return nil, err
	}
	if err := c.createNamespaces(ctx, KueueNamespace, ManagerNamespace); err != nil {
		return nil, err
	}
	if err := c.createNodes(ctx); err != nil {
		return nil, err
	}
	c.progress("kube-controller-manager, kube-scheduler, kwok, %d process node(s) started; namespaces and nodes created", c.o.ProcessNodes)
	if err := c.installCRDs(ctx); err != nil {
		return nil, err
	}
	c.progress("%d CRDs established", len(c.crds))
	servingHTTP, err := c.httpsClient(false)
	if err != nil {
		return nil, err
	}
	if err := c.waitHTTP(ctx, kcm, fmt.Sprintf("https://%s/healthz", loopback(c.ports.ControllerMgr)), servingHTTP); err != nil {
		return nil, err
	}
	if err := c.waitHTTP(ctx, sched, fmt.Sprintf("https://%s/healthz", loopback(c.ports.Scheduler)), servingHTTP); err != nil {
		return nil, err
	}
	c.progress("kube-controller-manager and kube-scheduler healthy")

	// 4. The controllers, in parallel; each one's webhook configurations are
	// registered only once its webhook server is up (they fail closed).
	starters := []func(context.Context) error{c.startJobSet, c.startKueue, c.StartManager}
	for i := 1; i < len(c.replicas); i++ {
		starters = append(starters, func(ctx context.Context) error { return c.StartManagerReplica(ctx, i) })
	}
	errs := make([]error, len(starters))
	var wg sync.WaitGroup
	for i, s := range starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// 5. Runtimes (validated by the manager's webhook), Ready nodes, default ServiceAccount.
	for _, f := range c.o.Runtimes {
		if err := c.ApplyFile(ctx, f); err != nil {
			return nil, fmt.Errorf("installing runtime %s: %w", f, err)
		}
	}
	if err := c.waitNodesReady(ctx); err != nil {
		return nil, err
	}
	if err := c.waitServiceAccount(ctx, "default"); err != nil {
		return nil, err
	}
	c.progress("cluster ready: %d runtimes installed, nodes Ready", len(c.o.Runtimes))
	return c, nil
}

// prepare resolves the module directories and renders every manifest and
// configuration file Up needs; it needs no running component.
func (c *Cluster) prepare(ctx context.Context) error {
	tools := filepath.Join(c.o.RepoDir, "test", "tools")
	var err error
	if c.kueueDir, err = moduleDir(ctx, filepath.Join(tools, "kueue"), "sigs.k8s.io/kueue"); err != nil {
		return err
	}
	if c.jobsetDir, err = moduleDir(ctx, filepath.Join(tools, "jobset"), "sigs.k8s.io/jobset"); err != nil {
		return err
	}
	if c.kwokDir, err = moduleDir(ctx, filepath.Join(tools, "kwok"), "sigs.k8s.io/kwok"); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var crdErr, whErr error
	wg.Add(2)
	go func() { defer wg.Done(); crdErr = c.renderCRDs(ctx) }()
	go func() { defer wg.Done(); whErr = c.prepareWebhookConfigs(ctx) }()
	wg.Wait()
	c.progress("manifests rendered")
	return errors.Join(crdErr, whErr, c.writeKwokStages(), c.writeJobSetConfig(), c.writeKueueConfig(c.o.KueueFrameworks))
}

// Down stops every component, newest first (SIGTERM, then SIGKILL after 10s). The
// state directory is left in place, logs included.
func (c *Cluster) Down() error {
	if c.proxy != nil {
		_ = c.proxy.Close()
	}
	return c.sup.stopAll()
}

// DownStateDir stops the cluster recorded in stateDir, from any process.
func DownStateDir(stateDir string) error {
	st, err := readState(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s := &supervisor{dir: stateDir, st: st, exits: map[int]chan struct{}{}}
	return s.stopAll()
}

// ProcessStatus is a recorded component and whether it still runs.
type ProcessStatus struct {
	Process
	Running bool
}

// StatusOf reports the components recorded in stateDir, oldest first, and the ports.
func StatusOf(stateDir string) ([]ProcessStatus, Ports, error) {
	st, err := readState(stateDir)
	if err != nil {
		return nil, Ports{}, err
	}
	ps := slices.Clone(st.Processes)
	slices.SortFunc(ps, func(a, b Process) int { return a.Seq - b.Seq })
	var out []ProcessStatus
	for _, p := range ps {
		out = append(out, ProcessStatus{Process: p, Running: procAlive(p.PID, p.StartTime)})
	}
	return out, st.Ports, nil
}

// StopManager sends sig to the Trainyard manager and waits until it is gone. For a
// signal other than SIGKILL it sends SIGKILL after 10s. The manager's webhook
// configurations stay registered, as in a cluster whose manager pod died.
func (c *Cluster) StopManager(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("unsupported signal %v", sig)
	}
	p, ok := c.sup.find(Manager)
	if !ok {
		return errors.New("the manager is not running")
	}
	return c.sup.stop(p, s, stopGrace)
}

// SetManagerArgs replaces the extra manager arguments (Options.ManagerArgs) for the
// next StartManager; the running manager is not affected.
func (c *Cluster) SetManagerArgs(args []string) {
	c.mu.Lock()
	c.o.ManagerArgs = slices.Clone(args)
	c.mu.Unlock()
	c.sup.mu.Lock()
	c.sup.st.ManagerArgs = slices.Clone(args)
	c.sup.mu.Unlock()
}

// StartManager starts the Trainyard manager (with Options.ManagerArgs, or those of SetManagerArgs) and waits for
// its /readyz; on the first start it also registers its webhook configurations.
// Note that with leader election a restarted manager reconciles only once the
// previous leader's lease has expired (up to 15s after a SIGKILL).
func (c *Cluster) StartManager(ctx context.Context) error {
	if _, ok := c.sup.find(Manager); ok {
		return errors.New("the manager is already running")
	}
	if err := c.StartManagerReplica(ctx, 0); err != nil {
		return err
	}
	if err := c.applyWebhookConfigs(ctx, Manager); err != nil {
		return err
	}
	c.progress("trainyard-manager ready (webhooks on %s)", loopback(c.ports.ManagerWebhook))
	return nil
}

// RestartKueue restarts Kueue with integrations.frameworks set to frameworks (nil
// means DefaultKueueFrameworks). Kueue's webhook configurations are removed while it
// is down, so that pods, Jobs, JobSets and TrainJobs can still be created meanwhile,
// and registered again once it is ready.
func (c *Cluster) RestartKueue(ctx context.Context, frameworks []string) error {
	if frameworks == nil {
		frameworks = DefaultKueueFrameworks
	}
	if err := c.deleteWebhookConfigs(ctx, Kueue); err != nil {
		return err
	}
	if p, ok := c.sup.find(Kueue); ok {
		if err := c.sup.stop(p, syscall.SIGTERM, stopGrace); err != nil {
			return err
		}
	}
	if err := c.writeKueueConfig(frameworks); err != nil {
		return err
	}
	c.mu.Lock()
	c.kueueFrameworks = slices.Clone(frameworks)
	c.mu.Unlock()
	c.sup.mu.Lock()
	c.sup.st.KueueFrameworks = slices.Clone(frameworks)
	c.sup.mu.Unlock()
	return c.startKueue(ctx)
}

func (c *Cluster) startJobSet(ctx context.Context) error {
	p, err := c.sup.start(JobSet, []string{filepath.Join(c.o.BinDir, JobSet),
		"--kubeconfig=" + c.Kubeconfig(), "--config=" + filepath.Join(c.o.StateDir, "config", "jobset.yaml")}, false)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/readyz", loopback(c.ports.JobSetHealth)), nil); err != nil {
		return err
	}
	if err := c.applyWebhookConfigs(ctx, JobSet); err != nil {
		return err
	}
	if err := c.waitWebhooksServed(ctx, JobSet); err != nil {
		return err
	}
	c.progress("jobset-controller ready (webhooks on %s)", loopback(c.ports.JobSetWebhook))
	return nil
}

// kueueScript runs in Kueue's private mount namespace: a tmpfs (invisible outside)
// backs an overlay on /etc that adds /etc/kueue/metrics/certs, then Kueue is exec'd,
// so the recorded PID is Kueue's.
const kueueScript = `set -e
mount -t tmpfs -o size=8m,mode=0700 trainyard-kueue "$1"
mkdir "$1/upper" "$1/work"
mount -t overlay trainyard-kueue-etc -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
mkdir -p /etc/kueue/metrics/certs
cp "$2/tls.crt" "$2/tls.key" /etc/kueue/metrics/certs/
shift 2
exec "$@"`

func (c *Cluster) startKueue(ctx context.Context) error {
	argv := []string{"/bin/sh", "-c", kueueScript, "kueue-ns",
		filepath.Join(c.o.StateDir, "kueue-mnt"), c.pki.servingDir(),
		filepath.Join(c.o.BinDir, Kueue),
		"--kubeconfig=" + c.Kubeconfig(),
		"--config=" + filepath.Join(c.o.StateDir, "config", "kueue.yaml"),
		// Otherwise Kueue serves its visibility API on :8082, on every interface.
		"--feature-gates=VisibilityOnDemand=false",
	}
	p, err := c.sup.start(Kueue, argv, true)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/readyz", loopback(c.ports.KueueHealth)), nil); err != nil {
		return err
	}
	if err := c.applyWebhookConfigs(ctx, Kueue); err != nil {
		return err
	}
	if err := c.waitWebhooksServed(ctx, Kueue); err != nil {
		return err
	}
	c.progress("kueue-controller ready (webhooks on %s, frameworks %v)", loopback(c.ports.KueueWebhook), c.KueueFrameworks())
	return nil
}

// waitHTTP polls url until it answers 200, the process exits, or the timeout passes.
func (c *Cluster) waitHTTP(ctx context.Context, p Process, url string, hc *http.Client) error {
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.ReadyTimeout)
	defer cancel()
	var last string
	for {
		if c.sup.exited(p) {
			return fmt.Errorf("%s exited while starting; end of %s:\n%s", p.Name, p.Log, tail(p.Log, 30))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s (%s); end of %s:\n%s", p.Name, url, c.o.ReadyTimeout, last, p.Log, tail(p.Log, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *Cluster) newClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	c.restConfig = cfg
	scheme := c.o.Scheme
	if scheme == nil {
		scheme = Scheme()
	}
	c.client, err = client.New(cfg, client.Options{Scheme: scheme})
	return err
}

// Scheme returns a scheme with the client-go kinds, CustomResourceDefinitions,
// JobSet v1alpha2 and Trainyard's trainer.kubeflow.org/v1alpha1.
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	return scheme
}

// Apply server-side-applies objects (forcing conflicts) as the cluster's field manager.
func (c *Cluster) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		// DeepCopy: the client writes the response (managedFields and all) into its argument.
		if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// ApplyFile server-side-applies every object of a YAML file.
func (c *Cluster) ApplyFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := decodeYAML(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return c.Apply(ctx, objs...)
}

func (c *Cluster) createNamespaces(ctx context.Context, names ...string) error {
	for _, n := range names {
		ns := &corev1.Namespace{}
		ns.Name = n
		if err := c.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", n, err)
		}
	}
	return nil
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
