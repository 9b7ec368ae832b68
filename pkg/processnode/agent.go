package processnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Agent is a process node's agent: it registers the Node and runs its pods.
type Agent struct {
	ready chan struct{}
	port  int
}

// New returns an agent; Run runs it.
func New() *Agent { return &Agent{ready: make(chan struct{})} }

// Ready is closed once the node is registered and pods are taken.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Port is the port of the kubelet API, known once Ready.
func (a *Agent) Port() int { return a.port }

// Run registers the Node and runs the pods bound to it until ctx ends; then it
// stops every pod (SIGTERM, SIGKILL after ShutdownGrace) and removes the pods'
// namespaces, veths and, if no other process node uses it, the bridge.
func (a *Agent) Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("processnode: the agent needs root (network, mount and PID namespaces per pod)")
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := lookPathHost(tool); err != nil {
			return fmt.Errorf("processnode: %s not found (Debian packages iproute2 and util-linux)", tool)
		}
	}
	logf := cfg.Logf
	if len(cfg.DefaultEnv) > 0 {
		logf("every container's environment starts with %s (a container's own value wins)", envPairs(cfg.DefaultEnv))
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "pods"), 0o755); err != nil {
		return err
	}
	cleanupStale(cfg.StateDir, logf)
	gpuList, err := discoverGPUs(ctx, cfg.NvidiaSMI, logf)
	if err != nil {
		return err
	}
	alloc, notes, err := newGPUAllocator(filepath.Join(cfg.StateDir, gpuStateFile), gpuList)
	if err != nil {
		return err
	}
	for _, n := range notes {
		logf("GPUs: %s", n)
	}

	client, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return err
	}
	if err := checkIdentity(ctx, client, cfg.NodeName); err != nil {
		if !errors.Is(err, errPrivileged) || !cfg.AllowPrivilegedCredentials {
			return fmt.Errorf("processnode: the agent's credential: %w (every pod of this node runs as root on this host and can read it: "+
				"give the agent a node's credential, a client certificate of CN %s and O %s, with the API server's Node authorizer and NodeRestriction; "+
				"--allow-privileged-credentials runs it anyway)", err, NodeUser(cfg.NodeName), NodesGroup)
		}
		for _, l := range []string{
			"WARNING: the agent runs with " + err.Error(),
			"WARNING: every pod bound to node " + cfg.NodeName + " runs as root on this host and can read this credential and use it",
			"WARNING: --allow-privileged-credentials: give the agent a node's credential instead (CN " + NodeUser(cfg.NodeName) + ", O " + NodesGroup + ")",
		} {
			logf("%s", l)
		}
	} else {
		logf("credential: %s in %s, no more than a node's", NodeUser(cfg.NodeName), NodesGroup)
	}
	nw, err := newNetwork(cfg.Bridge, cfg.PodCIDR, cfg.ClusterPodCIDR, logf)
	if err == nil && cfg.HostAddress != "" {
		err = nw.setHostAddress(cfg.HostAddress)
	}
	if err != nil {
		return err
	}
	if err := nw.ensureBridge(); err != nil {
		return err
	}
	defer nw.removeBridgeIfUnused()

	tlsConfig, err := serverTLS(cfg)
	if err != nil {
		return err
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(cfg.Port)), tlsConfig)
	if err != nil {
		return fmt.Errorf("kubelet API listener: %w", err)
	}
	defer func() { _ = ln.Close() }()
	a.port = ln.Addr().(*net.TCPAddr).Port

	nodeObj := nodeSpec(cfg, a.port, gpuList)
	ctrlCtx, cancelCtrl := context.WithCancel(context.Background())
	defer cancelCtrl()
	p := newProvider(ctrlCtx, &cfg, client, nw, nodeObj.Status.Allocatable, alloc)

	podFactory := informers.NewSharedInformerFactoryWithOptions(client, time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	otherFactory := informers.NewSharedInformerFactory(client, time.Minute)
	podInformer := podFactory.Core().V1().Pods()

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "trainyard-node", Host: cfg.NodeName})

	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         client.CoreV1(),
		PodInformer:       podInformer,
		EventRecorder:     recorder,
		Provider:          p,
		ConfigMapInformer: otherFactory.Core().V1().ConfigMaps(),
		SecretInformer:    otherFactory.Core().V1().Secrets(),
		ServiceInformer:   otherFactory.Core().V1().Services(),
		// The provider resolves the downward API itself: status.podIP is only
		// known to it.
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		return err
	}
	nc, err := node.NewNodeController(node.NaiveNodeProvider{}, nodeObj, client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 40))
	if err != nil {
		return err
	}

	// Pods of the other process nodes, for the hosts files.
	remoteFactory := informers.NewSharedInformerFactoryWithOptions(client, time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	remote := remoteFactory.Core().V1().Pods()
	_, clusterNet, _ := net.ParseCIDR(cfg.ClusterPodCIDR)
	syncRemote := func() {
		pods, err := remote.Lister().List(labels.Everything())
		if err != nil {
			return
		}
		var entries []HostEntry
		for _, pod := range pods {
			ip := net.ParseIP(pod.Status.PodIP)
			if ip == nil || !clusterNet.Contains(ip) || pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
				continue
			}
			entries = append(entries, HostEntry{UID: string(pod.UID), Namespace: pod.Namespace, Hostname: PodHostname(pod), Subdomain: pod.Spec.Subdomain, IP: pod.Status.PodIP})
		}
		p.hosts.setRemote(entries)
	}
	if _, err := remote.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { syncRemote() },
		UpdateFunc: func(interface{}, interface{}) { syncRemote() },
		DeleteFunc: func(interface{}) { syncRemote() },
	}); err != nil {
		return err
	}

	// Headless Services, for the hosts files: their names resolve to their ready
	// endpoints, as cluster DNS answers (e.g. a PyTorchJob's MASTER_ADDR, the
	// Service <job>-master-0). Only the process nodes' pods are reachable.
	sliceFactory := informers.NewSharedInformerFactoryWithOptions(client, time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = corev1.IsHeadlessService }))
	endpointSlices := sliceFactory.Discovery().V1().EndpointSlices()
	syncServices := func() {
		all, err := endpointSlices.Lister().List(labels.Everything())
		if err != nil {
			return
		}
		p.hosts.setServices(HeadlessServices(all, func(ip string) bool {
			parsed := net.ParseIP(ip)
			return parsed != nil && clusterNet.Contains(parsed)
		}))
	}
	if _, err := endpointSlices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { syncServices() },
		UpdateFunc: func(interface{}, interface{}) { syncServices() },
		DeleteFunc: func(interface{}) { syncServices() },
	}); err != nil {
		return err
	}

	mux := http.NewServeMux()
	api.AttachPodRoutes(api.PodHandlerConfig{
		GetContainerLogs: p.ContainerLogs,
		GetPods:          p.GetPods,
		GetPodsFromKubernetes: func(context.Context) ([]*corev1.Pod, error) {
			return podInformer.Lister().List(labels.Everything())
		},
	}, mux, false)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	podFactory.Start(ctrlCtx.Done())
	remoteFactory.Start(ctrlCtx.Done())
	sliceFactory.Start(ctrlCtx.Done())
	go func() { _ = pc.Run(ctrlCtx, 2) }()
	select {
	case <-pc.Ready():
	case <-pc.Done():
		return fmt.Errorf("pod controller: %w", pc.Err())
	case <-ctx.Done():
		return nil
	}
	// The pods bound to the node are listed: the GPUs recorded for pods that
	// are gone or over are free again.
	if listed, err := podInformer.Lister().List(labels.Everything()); err == nil {
		p.retainGPUs(listed)
	}
	go func() { _ = nc.Run(ctrlCtx) }()
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return fmt.Errorf("node controller: %w", nc.Err())
	case <-ctx.Done():
		return nil
	}
	if err := syncNodeLabels(ctx, client, nodeObj); err != nil {
		logf("%v", err)
	}
	if err := syncNodeTaints(ctx, client, &cfg); err != nil {
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("%w (a node may not change its own taints under NodeRestriction: delete the Node, kubectl delete node %s, and it registers again with them; meanwhile the agent refuses the pods that do not tolerate them all the same)", err, cfg.NodeName)
		}
		logf("tainting: %v", err)
	}
	if cfg.Untainted {
		logf("node %s is untainted: any pod bound to it runs as root on this host (a cluster of one user only)", cfg.NodeName)
	} else {
		logf("node %s is tainted %s: only pods that tolerate it run", cfg.NodeName, taintString(&ProcessNodeTaint))
	}
	if len(cfg.AllowedHostPaths) == 0 {
		logf("hostPath volumes: none allowed")
	} else {
		logf("hostPath volumes: allowed under %s", strings.Join(cfg.AllowedHostPaths, ", "))
	}
	logf("node %s registered (kubelet API on https://%s, pods on bridge %s, range %s)", cfg.NodeName,
		net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(a.port)), cfg.Bridge, cfg.PodCIDR)
	close(a.ready)

	var runErr error
	select {
	case <-ctx.Done():
	case <-pc.Done():
		runErr = fmt.Errorf("pod controller stopped: %v", pc.Err())
	case <-nc.Done():
		runErr = fmt.Errorf("node controller stopped: %v", nc.Err())
	}
	logf("stopping: ending every pod")
	p.stopAll(cfg.ShutdownGrace)
	cancelCtrl()
	logf("stopped")
	return runErr
}

func serverTLS(cfg Config) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(cfg.ClientCAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", cfg.ClientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// cleanupStale kills the sandboxes a previous agent with this state directory left
// behind (it was killed), which ends their pods and namespaces, and removes their files.
func cleanupStale(stateDir string, logf func(string, ...interface{})) {
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "pods", "*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "sandbox.pid"))
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
				if strings.Contains(string(env), SandboxEnv+"="+filepath.Join(d, "sandbox.json")) {
					logf("killing the sandbox of a previous run (pid %d, %s)", pid, filepath.Base(d))
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		_ = os.RemoveAll(d)
	}
}
