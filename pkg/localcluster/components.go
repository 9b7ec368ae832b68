package localcluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func (c *Cluster) bin(name string) string { return filepath.Join(c.o.BinDir, name) }

func (c *Cluster) etcdArgs() []string {
	client := "http://" + loopback(c.ports.EtcdClient)
	peer := "http://" + loopback(c.ports.EtcdPeer)
	return []string{c.bin(Etcd),
		"--name=local",
		"--data-dir=" + filepath.Join(c.o.StateDir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		"--unsafe-no-fsync=true", // throw-away data: no fsync, much faster on slow disks
		// etcd's largest recommended quota, not its 2 GiB default: the bench's
		// 50 000 suspended TrainJobs leave ≈ 10 objects each.
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	}
}

func (c *Cluster) apiserverArgs() []string {
	args := []string{c.bin(APIServer)}
	if c.nodeIP == "" {
		args = append(args, "--advertise-address=127.0.0.1", "--bind-address=127.0.0.1",
			// Since Kubernetes 1.37 the endpoint reconcilers refuse a loopback
			// address for the default/kubernetes Service's endpoints; nothing on
			// this host-only cluster uses them (clients dial 127.0.0.1 directly).
			"--endpoint-reconciler-type=none")
	} else {
		// Container nodes: pods reach the API server through the
		// default/kubernetes Service (10.0.0.1:443, in-cluster config), whose
		// endpoints the lease reconciler keeps at the node IP; kube-proxy
		// forwards to it. It listens there only, a host-only address
		// (NodeAddress): the host's clients dial it too (the kubeconfigs say
		// so, apiserverAddr), nothing on the LAN can.
		args = append(args, "--advertise-address="+c.nodeIP, "--bind-address="+c.nodeIP)
	}
	args = append(args,
		fmt.Sprintf("--secure-port=%d", c.ports.APIServer),
		"--etcd-servers=http://"+loopback(c.ports.EtcdClient),
		"--tls-cert-file="+c.pki.apiserverCert(), "--tls-private-key-file="+c.pki.apiserverKey(),
		"--client-ca-file="+c.pki.caCert(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+c.pki.saPub(),
		"--service-account-signing-key-file="+c.pki.saKey(),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		// Nodes (the container nodes' kubelets, the process nodes' agents)
		// may change only their own Node and the pods bound to them.
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--cert-dir="+filepath.Join(c.o.StateDir, "certs", "apiserver"),
		fmt.Sprintf("--profiling=%t", c.o.Profiling),
		// kubectl logs/-f reach the process nodes' kubelet API at their InternalIP
		// (127.0.0.1) with this client certificate, and check their serving
		// certificate against the cluster CA.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate="+c.pki.kubeletClientCert(),
		"--kubelet-client-key="+c.pki.kubeletClientKey(),
		"--kubelet-certificate-authority="+c.pki.caCert(),
	)
	if c.o.AuditLog {
		// The default (blocking) mode: no event is dropped under a burst.
		args = append(args, "--audit-policy-file="+c.auditPolicyFile(), "--audit-log-path="+c.AuditLogFile(),
			"--audit-log-format=json", "--audit-log-maxsize=1000000") // MB: never rotate
	}
	return args
}

// AuditLogFile is the API server's audit log (Options.AuditLog): one JSON
// audit.k8s.io/v1 Event per line.
func (c *Cluster) AuditLogFile() string { return filepath.Join(c.Logs(), "audit.log") }

func (c *Cluster) auditPolicyFile() string {
	return filepath.Join(c.o.StateDir, "config", "audit-policy.yaml")
}

// writeAuditPolicy records every request once, when its response is complete,
// without bodies.
func (c *Cluster) writeAuditPolicy() error {
	return writeJSON(c.auditPolicyFile(), map[string]interface{}{
		"apiVersion": "audit.k8s.io/v1",
		"kind":       "Policy",
		"omitStages": []string{"RequestReceived", "ResponseStarted"},
		"rules":      []map[string]interface{}{{"level": "Metadata"}},
	})
}

// qpsArgs lift a component's client rate limit when Options.DisableQPSLimits.
func (c *Cluster) qpsArgs() []string {
	if !c.o.DisableQPSLimits {
		return nil
	}
	return []string{"--kube-api-qps=5000", "--kube-api-burst=10000"}
}

// The secure ports of kube-controller-manager and kube-scheduler only serve /healthz
// here (always allowed); without authentication/authorization kubeconfigs they do
// not try to read the requestheader CA, which this apiserver lacks.
func (c *Cluster) controllerManagerArgs() []string {
	return append([]string{c.bin(ControllerManager),
		"--kubeconfig=" + c.Kubeconfig(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.ports.ControllerMgr),
		"--tls-cert-file=" + c.pki.servingCert(), "--tls-private-key-file=" + c.pki.servingKey(),
		"--cert-dir=" + filepath.Join(c.o.StateDir, "certs", "kube-controller-manager"),
		"--leader-elect=false",
		"--service-account-private-key-file=" + c.pki.saKey(),
		"--root-ca-file=" + c.pki.caCert(),
		"--cluster-signing-cert-file=" + c.pki.caCert(), "--cluster-signing-key-file=" + c.pki.caKey(),
		"--controllers=*",
		"--profiling=false",
	}, c.qpsArgs()...)
}

func (c *Cluster) schedulerArgs() []string {
	return append([]string{c.bin(Scheduler),
		"--kubeconfig=" + c.Kubeconfig(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.ports.Scheduler),
		"--tls-cert-file=" + c.pki.servingCert(), "--tls-private-key-file=" + c.pki.servingKey(),
		"--cert-dir=" + filepath.Join(c.o.StateDir, "certs", "kube-scheduler"),
		"--leader-elect=false",
		"--profiling=false",
	}, c.qpsArgs()...)
}

// kwok opens no port (no --server-address); pod IPs from --cidr only appear in status.
func (c *Cluster) kwokArgs() []string {
	return []string{c.bin(Kwok),
		"--kubeconfig=" + c.Kubeconfig(),
		"--config=" + filepath.Join(c.o.StateDir, "config", "kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeKey + "=" + KwokNodeValue,
		"--node-ip=127.0.0.1",
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
	}
}

func (c *Cluster) managerArgs(replica int) []string {
	p := c.replicas[replica]
	args := []string{c.o.ManagerBinary,
		"--kubeconfig=" + c.Kubeconfig(),
		"--cert-management=external",
		"--webhook-cert-dir=" + c.pki.servingDir(),
		"--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", p.Webhook),
		// Plain HTTP on the loopback interface: the bench and chaos harnesses
		// (ManagerMetricsURL) scrape without a token. In a real cluster the
		// metrics are HTTPS for authorized scrapers only.
		"--metrics-bind-address=" + loopback(p.Metrics), "--metrics-secure=false",
		"--health-probe-bind-address=" + loopback(p.Health),
		"--leader-elect", "--leader-election-namespace=" + ManagerNamespace,
		// The status server where pods reach it (statusHost, statusBind);
		// every replica renders the same URL, replica 0's, and the others
		// serve on a port of their own.
		"--status-server-bind-address=" + c.statusBind(replica, c.ports.ManagerStatus),
		fmt.Sprintf("--status-server-url=https://%s:%d", c.statusHost(), c.ports.ManagerStatus),
		"--status-server-ca-file=" + c.pki.caCert(),
	}
	if c.o.Profiling {
		args = append(args, "--pprof-bind-address="+loopback(p.Pprof))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(args, c.o.ManagerArgs...)
}

// KwokStages are the kwok stage files the cluster runs with: kwok's own
// (relative to kustomize/stage in the kwok module) and Trainyard's (prefixed
// "trainyard/", in kwokstages/ of this package). pod/general honours per-pod
// annotations, e.g. pod-create.stage.kwok.x-k8s.io/delay: "3s" (also
// /jitter-delay, and the same for pod-ready, pod-delete); label
// pod-container-running-failed.stage.kwok.x-k8s.io: "true" makes a pod fail.
// Trainyard's pod-complete replaces kwok's: how long a Job's pod runs follows
// its command (see kwok.go).
var KwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/general/pod-create.yaml",
	"pod/general/pod-init-container-running.yaml",
	"pod/general/pod-init-container-completed.yaml",
	"pod/general/pod-ready.yaml",
	trainyardStage + "pod-complete.yaml",
	"pod/general/pod-delete.yaml",
	"pod/chaos/pod-container-running-failed.yaml",
}

func (c *Cluster) writeKwokStages() error {
	var b strings.Builder
	for _, s := range KwokStages {
		data, err := kwokStage(c.kwokDir, s)
		if err != nil {
			return fmt.Errorf("kwok stage: %w", err)
		}
		b.WriteString("---\n")
		b.Write(data)
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
	}
	return os.WriteFile(filepath.Join(c.o.StateDir, "config", "kwok-stages.yaml"), []byte(b.String()), 0o644)
}

func (c *Cluster) writeJobSetConfig() error {
	cfg := map[string]interface{}{
		"apiVersion":             "config.jobset.x-k8s.io/v1alpha1",
		"kind":                   "Configuration",
		"leaderElection":         map[string]interface{}{"leaderElect": false},
		"internalCertManagement": map[string]interface{}{"enable": false},
		"webhook":                map[string]interface{}{"host": "127.0.0.1", "port": c.ports.JobSetWebhook, "certDir": c.pki.servingDir()},
		"metrics":                map[string]interface{}{"bindAddress": "0"},
		"health":                 map[string]interface{}{"healthProbeBindAddress": loopback(c.ports.JobSetHealth)},
	}
	return writeJSON(filepath.Join(c.o.StateDir, "config", "jobset.yaml"), cfg)
}

// Kueue's configuration. manageJobsWithoutQueueName stays false: otherwise Kueue
// would suspend every Job, JobSet and TrainJob without a queue-name label, including
// those of tests that do not use Kueue. The trainer.kubeflow.org/trainjob integration
// needs no feature gate in v0.16.1 or v0.17.1; it only needs the TrainJob CRD (installed before
// Kueue starts) and the JobSet API. The client's rate limit is the one Kueue's own
// manifests ship (config/components/manager/controller_manager_config.yaml: 50 QPS,
// burst 100, and its workers per kind), not the code's default (20, 30), and lifted
// with DisableQPSLimits: at
// 20 QPS Kueue spent its whole budget under a burst of 1000 jobs (measured: 3 995
// requests in 200 s), so both Kueue phases of make bench measured that limit rather
// than the integrations.
func (c *Cluster) writeKueueConfig(frameworks []string) error {
	qps, burst := 50, 100
	if c.o.DisableQPSLimits {
		qps, burst = 5000, 10000
	}
	// The workers per kind, as Kueue's manifests set them.
	concurrency := map[string]interface{}{
		"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
		"Cohort.kueue.x-k8s.io": 1, "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1,
	}
	if n := c.o.KueueConcurrency; n > 0 {
		concurrency["TrainJob.trainer.kubeflow.org"], concurrency["JobSet.jobset.x-k8s.io"] = n, n
	}
	cfg := map[string]interface{}{
		"apiVersion":                 "config.kueue.x-k8s.io/v1beta2",
		"kind":                       "Configuration",
		"namespace":                  KueueNamespace,
		"manageJobsWithoutQueueName": false,
		"leaderElection":             map[string]interface{}{"leaderElect": false},
		"internalCertManagement":     map[string]interface{}{"enable": false},
		"webhook":                    map[string]interface{}{"host": "127.0.0.1", "port": c.ports.KueueWebhook, "certDir": c.pki.servingDir()},
		"metrics":                    map[string]interface{}{"bindAddress": "0"},
		"health":                     map[string]interface{}{"healthProbeBindAddress": loopback(c.ports.KueueHealth)},
		"integrations":               map[string]interface{}{"frameworks": frameworks},
		"clientConnection":           map[string]interface{}{"qps": qps, "burst": burst},
		"controller":                 map[string]interface{}{"groupKindConcurrency": concurrency},
	}
	return writeJSON(filepath.Join(c.o.StateDir, "config", "kueue.yaml"), cfg)
}

// writeJSON writes v as JSON, which is YAML too.
func writeJSON(path string, v interface{}) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// apiserverAddr is where the API server listens: 127.0.0.1, or the node
// address with container nodes.
func (c *Cluster) apiserverAddr() string {
	if c.nodeIP != "" {
		return net.JoinHostPort(c.nodeIP, strconv.Itoa(c.ports.APIServer))
	}
	return loopback(c.ports.APIServer)
}

// readJSON reads what writeJSON wrote into v.
func readJSON(path string, v interface{}) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (c *Cluster) writeKubeconfig() error {
	ca, err := os.ReadFile(c.pki.caCert())
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(c.pki.adminCert())
	if err != nil {
		return err
	}
	key, err := os.ReadFile(c.pki.adminKey())
	if err != nil {
		return err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: trainyard-local
  cluster:
    server: https://%s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: trainyard-local
  context: {cluster: trainyard-local, user: admin}
current-context: trainyard-local
`, c.apiserverAddr(), base64Std(ca), base64Std(crt), base64Std(key))
	return os.WriteFile(c.Kubeconfig(), []byte(kc), 0o600)
}

// httpsClient trusts the cluster CA and, for admin, presents the admin certificate.
func (c *Cluster) httpsClient(admin bool) (*http.Client, error) {
	ca, err := os.ReadFile(c.pki.caCert())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("bad CA certificate")
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if admin {
		pair, err := tls.LoadX509KeyPair(c.pki.adminCert(), c.pki.adminKey())
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// statusHost is the host address in the status server's URL: process nodes'
// pods reach the host on their bridge (ProcessHostAddress), container nodes'
// pods only on the node IP, which process nodes' pods reach too (the host's
// own address, through their bridge). The serving certificate holds both.
func (c *Cluster) statusHost() string {
	if c.nodeIP != "" {
		return c.nodeIP
	}
	return ProcessHostAddress
}

// statusBind is where manager replica i serves the status server: replica 0
// on port, the others on a port the kernel picks; on the node address with
// container nodes (their pods and the process nodes' reach it there), else on
// every address (the process nodes' bridge address appears when the first
// agent starts).
func (c *Cluster) statusBind(replica, port int) string {
	if replica != 0 {
		port = 0
	}
	return net.JoinHostPort(c.nodeIP, strconv.Itoa(port))
}
