package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
		"--log-level=warn",
	}
}

func (c *Cluster) apiserverArgs() []string {
	args := []string{c.bin(APIServer),
		"--advertise-address=127.0.0.1", "--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.ports.APIServer),
		"--etcd-servers=http://" + loopback(c.ports.EtcdClient),
		"--tls-cert-file=" + c.pki.apiserverCert(), "--tls-private-key-file=" + c.pki.apiserverKey(),
		"--client-ca-file=" + c.pki.caCert(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.saPub(),
		"--service-account-signing-key-file=" + c.pki.saKey(),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(c.o.StateDir, "certs", "apiserver"),
		"--profiling=false",
		// kubectl logs/-f reach the process nodes' kubelet API at their InternalIP
		// (127.0.0.1) with this client certificate, and check their serving
		// certificate against the cluster CA.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + c.pki.kubeletClientCert(),
		"--kubelet-client-key=" + c.pki.kubeletClientKey(),
		"--kubelet-certificate-authority=" + c.pki.caCert(),
	}
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
		"--metrics-bind-address=" + loopback(p.Metrics),
		"--health-probe-bind-address=" + loopback(p.Health),
		"--leader-elect", "--leader-election-namespace=" + ManagerNamespace,
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(args, c.o.ManagerArgs...)
}

// KwokStages are the kwok stage files (relative to kustomize/stage in the kwok module)
// the cluster runs with. pod/general honours per-pod annotations, e.g.
// pod-complete.stage.kwok.x-k8s.io/delay: "30s" (also /jitter-delay, and the same for
// pod-create, pod-ready, pod-delete); label
// pod-container-running-failed.stage.kwok.x-k8s.io: "true" makes a pod fail. Without
// annotations every transition takes 1s plus up to 5s of jitter.
var KwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/general/pod-create.yaml",
	"pod/general/pod-init-container-running.yaml",
	"pod/general/pod-init-container-completed.yaml",
	"pod/general/pod-ready.yaml",
	"pod/general/pod-complete.yaml",
	"pod/general/pod-delete.yaml",
	"pod/chaos/pod-container-running-failed.yaml",
}

func (c *Cluster) writeKwokStages() error {
	var b strings.Builder
	for _, s := range KwokStages {
		data, err := os.ReadFile(filepath.Join(c.kwokDir, "kustomize", "stage", s))
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
// needs no feature gate in v0.16.1; it only needs the TrainJob CRD (installed before
// Kueue starts) and the JobSet API.
func (c *Cluster) writeKueueConfig(frameworks []string) error {
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
`, loopback(c.ports.APIServer), base64Std(ca), base64Std(crt), base64Std(key))
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

// createNodes creates the kwok nodes: kwok's fake-node annotation and taint, and
// the capacity the brief of this cluster calls for.
func (c *Cluster) createNodes(ctx context.Context) error {
	mk := func(name, pool string, gpus int) *corev1.Node {
		res := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   *resource.NewQuantity(int64(c.o.PodsPerNode), resource.DecimalSI),
		}
		if gpus > 0 {
			res[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		}
		n := &corev1.Node{}
		n.Name = name
		n.Labels = map[string]string{
			"type":                   "kwok",
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			PoolLabel:                pool,
		}
		n.Annotations = map[string]string{KwokNodeKey: KwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"}
		if !c.o.UntaintedNodes {
			n.Spec.Taints = []corev1.Taint{{Key: KwokNodeKey, Value: KwokNodeValue, Effect: corev1.TaintEffectNoSchedule}}
		}
		n.Status.Capacity = res
		n.Status.Allocatable = res.DeepCopy()
		return n
	}
	var nodes []*corev1.Node
	for i := 0; i < c.o.CPUNodes; i++ {
		nodes = append(nodes, mk(fmt.Sprintf("kwok-cpu-%d", i), "cpu", 0))
	}
	for i := 0; i < c.o.GPUNodes; i++ {
		nodes = append(nodes, mk(fmt.Sprintf("kwok-gpu-%d", i), "gpu", c.o.GPUsPerNode))
	}
	for _, n := range nodes {
		want := n.Status.DeepCopy()
		if err := c.client.Create(ctx, n); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		if len(n.Status.Capacity) == 0 { // in case the API server dropped the status
			n.Status = *want
			if err := c.client.Status().Update(ctx, n); err != nil {
				return fmt.Errorf("setting status of node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

// waitNodesReady waits until every kwok and process node is Ready and carries no
// taint but kwok's.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	want := c.o.CPUNodes + c.o.GPUNodes + c.o.ProcessNodes
	return c.poll(ctx, "nodes to become Ready", func() (bool, string, error) {
		var nl corev1.NodeList
		if err := c.client.List(ctx, &nl); err != nil {
			return false, "", err
		}
		ready := 0
		var notReady []string
		for _, n := range nl.Items {
			ok := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ok = true
				}
			}
			for _, t := range n.Spec.Taints {
				if t.Key != KwokNodeKey {
					ok = false
				}
			}
			if ok {
				ready++
			} else {
				notReady = append(notReady, n.Name)
			}
		}
		return ready >= want, fmt.Sprintf("%d/%d ready, waiting for %v", ready, want, notReady), nil
	})
}

func (c *Cluster) waitServiceAccount(ctx context.Context, ns string) error {
	return c.poll(ctx, "ServiceAccount "+ns+"/default", func() (bool, string, error) {
		err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		return err == nil, "", err
	})
}

// poll runs check every 200ms until it returns true, an error, or ReadyTimeout passes.
func (c *Cluster) poll(ctx context.Context, what string, check func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ReadyTimeout)
	defer cancel()
	var last string
	for {
		ok, msg, err := check()
		if err != nil && ctx.Err() == nil {
			last = err.Error()
		} else if ok {
			return nil
		} else {
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %s", what, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) caBundle() ([]byte, error) { return os.ReadFile(c.pki.caCert()) }

// renderCRDs reads JobSet's CRD (module zip), Kueue's CRDs (rendered with kustomize,
// whose patches add the conversion webhook, rewritten to a loopback URL) and
// Trainyard's.
func (c *Cluster) renderCRDs(ctx context.Context) error {
	ca, err := c.caBundle()
	if err != nil {
		return err
	}
	jobset, err := readYAMLFiles(filepath.Join(c.jobsetDir, "config", "components", "crd", "bases"))
	if err != nil {
		return err
	}
	rendered, err := kustomize(ctx, c.bin("kubectl"), filepath.Join(c.kueueDir, "config", "components", "crd"))
	if err != nil {
		return err
	}
	kueueObjs, err := decodeYAML(rendered)
	if err != nil {
		return err
	}
	kueue, err := localConversion(kueueObjs, webhookClientConfig{port: c.ports.KueueWebhook, caBundle: ca})
	if err != nil {
		return err
	}
	trainyard, err := readYAMLFiles(filepath.Join(c.o.RepoDir, "manifests", "base", "crds"))
	if err != nil {
		return err
	}
	c.crds = nil
	for _, group := range [][]*unstructured.Unstructured{jobset, kueue, trainyard} {
		for _, o := range group {
			if o.GetKind() == "CustomResourceDefinition" {
				c.crds = append(c.crds, o)
			}
		}
	}
	return writeManifests(filepath.Join(c.o.StateDir, "manifests", "crds.yaml"), c.crds)
}

// installCRDs applies the CRDs and waits until all are Established.
func (c *Cluster) installCRDs(ctx context.Context) error {
	if err := c.Apply(ctx, c.crds...); err != nil {
		return err
	}
	return c.poll(ctx, "CRDs to be established", func() (bool, string, error) {
		for _, o := range c.crds {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.client.Get(ctx, client.ObjectKey{Name: o.GetName()}, &crd); err != nil {
				return false, "", err
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, crd.Name + " not established", nil
			}
		}
		return true, "", nil
	})
}

// prepareWebhookConfigs renders the three projects' webhook configurations, pointed
// at their servers on 127.0.0.1 and renamed apart (controller-gen gives every project
// the same names).
func (c *Cluster) prepareWebhookConfigs(ctx context.Context) error {
	ca, err := c.caBundle()
	if err != nil {
		return err
	}
	kubectl := c.bin("kubectl")
	jsRendered, err := kustomize(ctx, kubectl, filepath.Join(c.jobsetDir, "config", "components", "webhook"))
	if err != nil {
		return err
	}
	kqRendered, err := kustomize(ctx, kubectl, filepath.Join(c.kueueDir, "config", "components", "webhook"))
	if err != nil {
		return err
	}
	tyRaw, err := os.ReadFile(filepath.Join(c.o.RepoDir, "manifests", "base", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	for _, x := range []struct {
		component, prefix string
		data              []byte
		port              int
	}{
		{JobSet, "jobset-", jsRendered, c.ports.JobSetWebhook},
		{Kueue, "kueue-", kqRendered, c.ports.KueueWebhook},
		{Manager, "trainyard-", tyRaw, c.ports.ManagerWebhook},
	} {
		objs, err := decodeYAML(x.data)
		if err != nil {
			return fmt.Errorf("%s webhooks: %w", x.component, err)
		}
		local, err := localWebhookConfigurations(objs, x.prefix, webhookClientConfig{port: x.port, caBundle: ca})
		if err != nil {
			return fmt.Errorf("%s webhooks: %w", x.component, err)
		}
		if err := writeManifests(filepath.Join(c.o.StateDir, "manifests", x.component+"-webhooks.yaml"), local); err != nil {
			return err
		}
		c.mu.Lock()
		c.webhookConfigs[x.component] = local
		c.mu.Unlock()
	}
	return nil
}

func (c *Cluster) applyWebhookConfigs(ctx context.Context, component string) error {
	c.mu.Lock()
	objs := c.webhookConfigs[component]
	c.mu.Unlock()
	return c.Apply(ctx, objs...)
}

func (c *Cluster) deleteWebhookConfigs(ctx context.Context, component string) error {
	c.mu.Lock()
	objs := c.webhookConfigs[component]
	c.mu.Unlock()
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GroupVersionKind())
		u.SetName(o.GetName())
		if err := c.client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// waitWebhooksServed waits until the API server calls the component's mutating
// webhooks: registering a configuration reaches the API server's admission chain a
// moment later, and a JobSet created in that moment would not be defaulted (or, for
// Kueue, not suspended). It server-side dry-run creates an object the webhook is
// known to change. Trainyard's webhooks are not probed: they are registered once,
// and what they change is Trainyard's own business.
func (c *Cluster) waitWebhooksServed(ctx context.Context, component string) error {
	var probe *unstructured.Unstructured
	var served func(*unstructured.Unstructured) bool
	podTemplate := map[string]interface{}{
		"spec": map[string]interface{}{
			"restartPolicy": "Never",
			"containers":    []interface{}{map[string]interface{}{"name": "probe", "image": "probe"}},
		},
	}
	switch component {
	case Kueue:
		// Kueue's Job webhook suspends a Job that names a queue.
		probe = &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]interface{}{"generateName": "kueue-webhook-probe-", "namespace": "default",
				"labels": map[string]interface{}{"kueue.x-k8s.io/queue-name": "webhook-probe"}},
			"spec": map[string]interface{}{"suspend": false, "template": podTemplate},
		}}
		served = func(u *unstructured.Unstructured) bool {
			s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
			return s
		}
	case JobSet:
		// JobSet's webhook (not the CRD) defaults spec.network.enableDNSHostnames.
		probe = &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
			"metadata": map[string]interface{}{"generateName": "jobset-webhook-probe-", "namespace": "default"},
			"spec": map[string]interface{}{"replicatedJobs": []interface{}{map[string]interface{}{
				"name": "p", "template": map[string]interface{}{"spec": map[string]interface{}{"template": podTemplate}},
			}}},
		}}
		served = func(u *unstructured.Unstructured) bool {
			v, found, _ := unstructured.NestedBool(u.Object, "spec", "network", "enableDNSHostnames")
			return found && v
		}
	default:
		return nil
	}
	return c.poll(ctx, component+" webhooks to be called by the API server", func() (bool, string, error) {
		u := probe.DeepCopy()
		if err := c.client.Create(ctx, u, client.DryRunAll); err != nil {
			return false, err.Error(), nil
		}
		return served(u), "not called yet", nil
	})
}
