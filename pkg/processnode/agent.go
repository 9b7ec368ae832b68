package processnode

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
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
	// Labels and Taints are added to the Node's.
	Labels map[string]string
	Taints []corev1.Taint
	// BackoffBase and BackoffMax bound the crash-loop back-off (defaults 10s, 5m).
	BackoffBase, BackoffMax time.Duration
	// SandboxBinary is started as each pod's sandbox with SandboxEnv set; it must
	// call RunSandboxIfRequested first. Default: this executable.
	SandboxBinary string
	// ShutdownGrace bounds the grace period of the pods when the agent stops (default 5s).
	ShutdownGrace time.Duration
	// Logf receives the agent's log lines; default: stderr.
	Logf func(format string, args ...interface{})
}

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

// Ready is closed by Run once the Node is registered and pods are taken.
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
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "pods"), 0o755); err != nil {
		return err
	}
	cleanupStale(cfg.StateDir, logf)

	client, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return err
	}
	nw, err := newNetwork(cfg.Bridge, cfg.PodCIDR, cfg.ClusterPodCIDR, logf)
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
	defer ln.Close()
	a.port = ln.Addr().(*net.TCPAddr).Port

	nodeObj := nodeSpec(cfg, a.port)
	ctrlCtx, cancelCtrl := context.WithCancel(context.Background())
	defer cancelCtrl()
	p := newProvider(ctrlCtx, &cfg, client, nw, nodeObj.Status.Allocatable)

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
	defer srv.Close()

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
	go func() { _ = nc.Run(ctrlCtx) }()
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return fmt.Errorf("node controller: %w", nc.Err())
	case <-ctx.Done():
		return nil
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

// nodeSpec is the Node the agent registers: the host's CPUs and memory, Ready,
// reachable at HostIP:port.
func nodeSpec(cfg Config, port int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	lbls := map[string]string{
		"type":                   "process",
		"kubernetes.io/hostname": cfg.NodeName,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     runtime.GOARCH,
		"kubernetes.io/role":     "agent",
		PoolLabel:                PoolProcess,
		ProcessNodeLabel:         "true",
	}
	for k, v := range cfg.Labels {
		lbls[k] = v
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: cfg.Taints, PodCIDR: cfg.PodCIDR, PodCIDRs: []string{cfg.PodCIDR}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "trainyard process node is ready"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", ""),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: cfg.HostIP},
				{Type: corev1.NodeHostName, Address: cfg.NodeName},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				KernelVersion:           unix.ByteSliceToString(uts.Release[:]),
				OSImage:                 osImage(),
				KubeletVersion:          "v1.35.4-trainyard-process-node",
				ContainerRuntimeVersion: "process://1",
			},
		},
	}
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

func lookPathHost(name string) (string, error) {
	for _, d := range filepath.SplitList(os.Getenv("PATH") + ":" + DefaultPath) {
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
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
