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
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// Entries of a state directory that Up (re)creates; nothing else in it is touched.
var stateEntries = []string{"state.json", "state.json.tmp", "kubeconfig", "pki", "etcd", "logs", "config", "manifests", "home", "certs", "kueue-mnt", "process-nodes", "container-nodes"}

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
		fix := "run `make cluster-tools`"
		if o.ContainerNodes > 0 {
			fix += "; for the container nodes `test/tools/build.sh bin/k8s kubelet kube-proxy coredns provisioner`"
		}
		return nil, fmt.Errorf("cluster: missing binaries (%s): %s", fix, strings.Join(missing, ", "))
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
	// A previous cluster's container nodes may have left containers and
	// mounts behind (killed without Down).
	if err := cleanupContainerNodes(o.StateDir); err != nil {
		return nil, fmt.Errorf("cluster: cleaning up the previous cluster's container nodes: %w", err)
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
	started := c         // the error returns below set the named result c to nil
	defer func() {
		if err != nil {
			c := started
			if prepPending {
				// Let it finish before the caller may remove StateDir.
				if perr := <-prepErr; perr != nil {
					err = errors.Join(err, perr)
				}
			}
			c.progress("start failed, stopping: %v", err)
			if derr := c.sup.stopAll(); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()

	if err := c.prepareContainerNodes(ctx); err != nil {
		return nil, err
	}
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
	if c.o.Bare {
		if err := c.upBare(ctx); err != nil {
			return nil, err
		}
		return c, nil
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
	if err := c.startContainerNodes(ctx); err != nil {
		return nil, err
	}
	if err := c.createNamespaces(ctx, KueueNamespace, ManagerNamespace); err != nil {
		return nil, err
	}
	if err := c.createNodes(ctx); err != nil {
		return nil, err
	}
	c.progress("kube-controller-manager, kube-scheduler, kwok, %d process node(s), %d container node(s) started; namespaces and nodes created", c.o.ProcessNodes, c.o.ContainerNodes)
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
	if c.o.GangScheduler == GangSchedulerCoscheduling {
		if err := c.startCoscheduling(ctx); err != nil {
			return nil, err
		}
	}

	// 4. The controllers, in parallel; each one's webhook configurations are
	// registered only once its webhook server is up (they fail closed).
	starters := []func(context.Context) error{c.startJobSet, c.startKueue}
	if !c.o.ExternalManager {
		starters = append(starters, c.StartManager)
	}
	if c.o.GangScheduler == GangSchedulerVolcano {
		starters = append(starters, c.startVolcano)
	}
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

	// 5. Runtimes (validated by the manager's webhook), the users' roles, Ready
	// nodes, default ServiceAccount.
	if !c.o.ExternalManager {
		if err := c.installUserRBAC(ctx); err != nil {
			return nil, err
		}
		c.installVersion(ctx)
	}
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
	c.progress("%s", c.o.readyMessage())
	return c, nil
}

// prepare resolves the module directories and renders every manifest and
// configuration file Up needs; it needs no running component.
func (c *Cluster) prepare(ctx context.Context) error {
	// The tool modules the binaries are built from (test/tools/README.md):
	// JobSet and kwok share the cluster module, Kueue has its own.
	tools := filepath.Join(c.o.RepoDir, "test", "tools")
	var err error
	if c.kueueDir, err = moduleDir(ctx, filepath.Join(tools, "kueue"), "sigs.k8s.io/kueue"); err != nil {
		return err
	}
	if c.jobsetDir, err = moduleDir(ctx, filepath.Join(tools, "cluster"), "sigs.k8s.io/jobset"); err != nil {
		return err
	}
	if c.kwokDir, err = moduleDir(ctx, filepath.Join(tools, "cluster"), "sigs.k8s.io/kwok"); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var crdErr, whErr error
	wg.Add(2)
	go func() { defer wg.Done(); crdErr = c.renderCRDs(ctx) }()
	go func() { defer wg.Done(); whErr = c.prepareWebhookConfigs(ctx) }()
	wg.Wait()
	if crdErr == nil && c.o.GangScheduler == GangSchedulerVolcano {
		crdErr = c.prepareVolcano(ctx)
	}
	if crdErr == nil && c.o.GangScheduler == GangSchedulerCoscheduling {
		crdErr = c.prepareCoscheduling(ctx)
	}
	c.progress("manifests rendered")
	return errors.Join(crdErr, whErr, c.writeKwokStages(), c.writeJobSetConfig(), c.writeKueueConfig(c.o.KueueFrameworks))
}
