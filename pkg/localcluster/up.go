package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
		if o.GangScheduler != "" {
			fix = "run `make cluster-tools GANG_SCHEDULER=" + o.GangScheduler + "`"
		}
		if o.ContainerNodes > 0 {
			fix += "; for the container nodes `make container-node-tools`"
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
	if err := c.waitHTTP(ctx, api, fmt.Sprintf("https://%s/readyz", c.apiserverAddr()), adminHTTP); err != nil {
		return nil, err
	}
	c.progress("kube-apiserver ready on %s", c.apiserverAddr())
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
	if c.o.kwokNodes() > 0 { // kwok manages only the kwok nodes
		if _, err := c.sup.start(Kwok, c.kwokArgs(), false); err != nil {
			return nil, err
		}
	}
	if err := c.startProcessNodes(ctx); err != nil {
		return nil, err
	}
	if err := c.startContainerNodes(ctx); err != nil {
		return nil, err
	}
	namespaces := []string{ManagerNamespace}
	if !c.o.NoKueue {
		namespaces = append(namespaces, KueueNamespace)
	}
	if err := c.createNamespaces(ctx, namespaces...); err != nil {
		return nil, err
	}
	if err := c.createNodes(ctx); err != nil {
		return nil, err
	}
	c.progress("kube-controller-manager, kube-scheduler, %d kwok node(s), %d process node(s), %d container node(s) started; namespaces and nodes created", c.o.kwokNodes(), c.o.ProcessNodes, c.o.ContainerNodes)
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
	starters := []func(context.Context) error{c.startJobSet}
	if !c.o.NoKueue {
		starters = append(starters, c.startKueue)
	}
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
		if err := c.installRuntime(ctx, f); err != nil {
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
	// The modules the binaries are built from, at their versions.
	var err error
	if !c.o.NoKueue {
		if c.kueueDir, err = moduleDir(ctx, c.bin("kueue-controller"), "sigs.k8s.io/kueue"); err != nil {
			return err
		}
	}
	if c.jobsetDir, err = moduleDir(ctx, c.bin("jobset-controller"), "sigs.k8s.io/jobset"); err != nil {
		return err
	}
	if c.o.kwokNodes() > 0 {
		if c.kwokDir, err = moduleDir(ctx, c.bin("kwok"), "sigs.k8s.io/kwok"); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	var crdErr, whErr error
	wg.Add(2)
	go func() { defer wg.Done(); crdErr = c.renderCRDs() }()
	go func() { defer wg.Done(); whErr = c.prepareWebhookConfigs() }()
	wg.Wait()
	if crdErr == nil && c.o.GangScheduler == GangSchedulerVolcano {
		crdErr = c.prepareVolcano(ctx)
	}
	if crdErr == nil && c.o.GangScheduler == GangSchedulerCoscheduling {
		crdErr = c.prepareCoscheduling(ctx)
	}
	c.progress("manifests rendered")
	errs := []error{crdErr, whErr, c.writeJobSetConfig()}
	if c.o.kwokNodes() > 0 {
		errs = append(errs, c.writeKwokStages())
	}
	if !c.o.NoKueue {
		errs = append(errs, c.writeKueueConfig(c.o.KueueFrameworks))
	}
	return errors.Join(errs...)
}
