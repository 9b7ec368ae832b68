// Package processnode runs pods through the process node agent (pkg/processnode)
// against a real kube-apiserver and etcd: no scheduler, so the pods name the node.
// Needs root (namespaces, veths, mounts); skipped otherwise, and failed under
// CI=true (test/prereq).
package processnode

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/trainyard/trainyard/pkg/processnode"
	"github.com/trainyard/trainyard/test/integration/framework"
	"github.com/trainyard/trainyard/test/prereq"
)

const nodeName = "pn-integration"

var (
	testEnv *framework.Env
	// agentStateDir is the agent's state directory.
	agentStateDir string
	// hostPathRoot is the one directory the agent allows hostPath volumes under.
	hostPathRoot string
	// credentialFile is a credential file of the agent (Config.CredentialFiles).
	credentialFile string
	cs             kubernetes.Interface
	agent          *processnode.Agent
	bridge         string
	kubeletHC      *http.Client
)

func TestMain(m *testing.M) {
	// The agent starts this test binary as each pod's sandbox.
	processnode.RunSandboxIfRequested()
	const suite = "processnode integration"
	prereq.MainRequire(suite, os.Geteuid() == 0, "needs root (the agent makes network namespaces and a bridge): run the tests as root")
	for _, tool := range []string{"ip", "nsenter"} {
		_, err := exec.LookPath(tool)
		prereq.MainRequire(suite, err == nil, tool+" not installed (Debian's iproute2 and util-linux)")
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The API server authorizes nodes as a cluster does (Node authorizer,
	// NodeRestriction), and the agent runs with a node's credential, which
	// it checks at start.
	env, err := framework.Start(framework.Options{NodeAuthorization: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	testEnv = env
	if cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, o := range []any{processnode.ClusterRole(), processnode.ClusterRoleBinding(nodeName)} {
		var err error
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(context.Background(), o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(context.Background(), o, metav1.CreateOptions{})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "process node RBAC:", err)
			return 1
		}
	}
	nodeConfig, err := env.UserConfig(processnode.NodeUser(nodeName), processnode.NodesGroup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "processnode-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	certs, err := makeCerts(filepath.Join(dir, "pki"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeletHC = certs.client
	stateDir := filepath.Join(dir, "state")
	nvidiaSMI := filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(nvidiaSMI, []byte(fakeNvidiaSMI), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	agentStateDir = stateDir
	hostPathRoot = filepath.Join(dir, "host-paths")
	if err := os.MkdirAll(hostPathRoot, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A credential file of the agent's (the test's agent has its credential
	// in memory): every pod's view of it is empty.
	credentialFile = filepath.Join(dir, "credentials", "kubeconfig")
	if err := os.MkdirAll(filepath.Dir(credentialFile), 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(credentialFile, []byte("a node's credential\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bridge = processnode.DefaultBridge(stateDir)
	ctx, cancel := context.WithCancel(context.Background())
	agent = processnode.New()
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, processnode.Config{
			NodeName: nodeName, RESTConfig: nodeConfig, StateDir: stateDir,
			TLSCertFile: certs.serverCert, TLSKeyFile: certs.serverKey, ClientCAFile: certs.ca,
			PodCIDR: "10.254.200.0/24", BackoffBase: time.Second, ShutdownGrace: 2 * time.Second,
			DefaultEnv: nodeDefaultEnv, NvidiaSMI: nvidiaSMI,
			// Tainted, as by default; hostPath volumes under hostPathRoot only.
			AllowedHostPaths: []string{hostPathRoot}, CredentialFiles: []string{credentialFile},
		})
	}()
	select {
	case <-agent.Ready():
	case err := <-done:
		fmt.Fprintln(os.Stderr, "agent:", err)
		cancel()
		return 1
	case <-time.After(time.Minute):
		fmt.Fprintln(os.Stderr, "agent not ready after a minute")
		cancel()
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		code = 1
	}
	// Stopping removed the pods' veths and the bridge.
	if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
		fmt.Fprintf(os.Stderr, "bridge %s still exists after the agent stopped\n", bridge)
		code = 1
	}
	return code
}

type testCerts struct {
	ca, serverCert, serverKey string
	client                    *http.Client
}

// makeCerts writes a CA, a serving certificate for 127.0.0.1 and returns an HTTP
// client with a client certificate of that CA (what the API server presents).
func makeCerts(dir string) (*testCerts, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "it-ca"}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte, error) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kb, _ := x509.MarshalPKCS8PrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
	}
	srvCert, srvKey, err := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	cliCert, cliKey, err := leaf(3, "kube-apiserver-kubelet-client", x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	t := &testCerts{ca: filepath.Join(dir, "ca.crt"), serverCert: filepath.Join(dir, "tls.crt"), serverKey: filepath.Join(dir, "tls.key")}
	for p, b := range map[string][]byte{t.ca: caPEM, t.serverCert: srvCert, t.serverKey: srvKey} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
	}
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	t.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
	return t, nil
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createNamespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// processNodeToleration tolerates the process node's taint.
var processNodeToleration = corev1.Toleration{Key: processnode.ProcessNodeTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// shPod is a pod on the process node running sh -c script; it tolerates the
// node's taint.
func shPod(ns, name, script string, policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:      nodeName,
			RestartPolicy: policy,
			Tolerations:   []corev1.Toleration{processNodeToleration},
			Containers:    []corev1.Container{{Name: "c", Image: "ignored", Command: []string{"sh", "-c", script}}},
		},
	}
}

// waitPod polls the pod until ok or the timeout.
func waitPod(t *testing.T, ctx context.Context, ns, name string, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	for ctx.Err() == nil {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("pod %s/%s: %s: timed out; status %+v", ns, name, what, last.Status)
	}
	t.Fatalf("pod %s/%s: %s: timed out", ns, name, what)
	return nil
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// kubeletLogs reads a container's log from the agent's kubelet API, as the API
// server does for kubectl logs.
func kubeletLogs(t *testing.T, ns, pod, container, query string) string {
	t.Helper()
	url := fmt.Sprintf("https://127.0.0.1:%d/containerLogs/%s/%s/%s?%s", agent.Port(), ns, pod, container, query)
	resp, err := kubeletHC.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

func TestNodeRegistered(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[processnode.PoolLabel] != processnode.PoolProcess {
		t.Errorf("labels %v", n.Labels)
	}
	if int(n.Status.DaemonEndpoints.KubeletEndpoint.Port) != agent.Port() {
		t.Errorf("kubelet port %d, agent serves on %d", n.Status.DaemonEndpoints.KubeletEndpoint.Port, agent.Port())
	}
	if n.Status.Capacity.Cpu().Value() < 1 || n.Status.Capacity.Memory().Value() < 1<<20 {
		t.Errorf("capacity from the host: %v", n.Status.Capacity)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	}
	if !ready {
		t.Errorf("node not Ready: %+v", n.Status.Conditions)
	}
	// The kubelet API requires a client certificate of the cluster CA.
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := plain.Get(fmt.Sprintf("https://127.0.0.1:%d/pods", agent.Port())); err == nil {
		_ = resp.Body.Close()
		t.Errorf("kubelet API answered %s without a client certificate", resp.Status)
	}
}

func TestPodRunsWithKubeletEnvironment(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "env"
	createNamespace(t, ctx, ns)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"greeting": "hello", "train.sh": "echo from-configmap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Neither the working directory nor the mountPath exists on the host; both
	// must appear in the pod only.
	workdir := "/trainyard-it-" + fmt.Sprint(time.Now().UnixNano()) + "/work"
	cfgDir := "/trainyard-it-cfg-" + fmt.Sprint(time.Now().UnixNano())
	pod := shPod(ns, "env", `echo "host=$(hostname) pwd=$(pwd) rank=$RANK ip=$IP node=$NODE greet=$GREET addr=$ADDR"
grep -c svc.cluster.local /etc/hosts
sh $CFG/train.sh
echo to-stderr >&2
exit 0`, corev1.RestartPolicyNever)
	pod.Annotations = map[string]string{"batch.kubernetes.io/job-completion-index": "1"}
	pod.Spec.Hostname, pod.Spec.Subdomain = "job-node-0-1", "job"
	c := &pod.Spec.Containers[0]
	c.WorkingDir = workdir
	c.Env = []corev1.EnvVar{
		{Name: "RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
		{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "GREET", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
		{Name: "ADDR", Value: "$(IP):29500"},
		{Name: "CFG", Value: cfgDir},
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: cfgDir}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ctx, ns, "env", "finished", finished)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phase %s, status %+v\nlogs: %s", p.Status.Phase, p.Status, kubeletLogs(t, ns, "env", "c", ""))
	}
	ip := p.Status.PodIP
	if !strings.HasPrefix(ip, "10.254.200.") {
		t.Errorf("pod IP %q not from the node's range", ip)
	}
	logs := kubeletLogs(t, ns, "env", "c", "")
	// stdout and stderr are two pipes, read concurrently (as a kubelet's
	// runtime reads them), so only the order within each stream is defined.
	wantStdout := fmt.Sprintf("host=job-node-0-1 pwd=%s rank=1 ip=%s node=%s greet=hello addr=%s:29500\n1\nfrom-configmap\n", workdir, ip, nodeName, ip)
	if strings.Count(logs, "to-stderr\n") != 1 || strings.Replace(logs, "to-stderr\n", "", 1) != wantStdout {
		t.Errorf("logs:\n%s\nwant stdout:\n%s\nand one line to-stderr", logs, wantStdout)
	}
	lines := strings.SplitAfter(logs, "\n")
	last := lines[len(lines)-2] // the text ends with a newline
	if got := kubeletLogs(t, ns, "env", "c", "tailLines=1&timestamps=true"); !strings.HasSuffix(got, " "+last) || !strings.HasPrefix(got, "20") {
		t.Errorf("tail with timestamps: %q, want the last line %q after a timestamp", got, last)
	}
	for _, p := range []string{filepath.Dir(workdir), cfgDir} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created on the host", p)
		}
	}
	st := p.Status.ContainerStatuses[0]
	if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 || st.State.Terminated.Reason != "Completed" {
		t.Errorf("container status %+v", st)
	}
}

func TestExitCodesAndRestarts(t *testing.T) {
	ctx := ctxT(t, 90*time.Second)
	const ns = "restarts"
	createNamespace(t, ctx, ns)
	for _, p := range []*corev1.Pod{
		shPod(ns, "fails", "echo bye; exit 3", corev1.RestartPolicyNever),
		// Fails on its first run, succeeds on the second (an emptyDir survives restarts).
		shPod(ns, "flaky", `if [ -e /scratch/ran ]; then echo second; exit 0; fi; touch /scratch/ran; echo first; exit 1`, corev1.RestartPolicyOnFailure),
		shPod(ns, "nocmd", "", corev1.RestartPolicyNever),
	} {
		if p.Name == "flaky" {
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		}
		if p.Name == "nocmd" {
			p.Spec.Containers[0].Command = []string{"/no/such/program"}
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := waitPod(t, ctx, ns, "fails", "finished", finished)
	if st := p.Status.ContainerStatuses[0].State.Terminated; p.Status.Phase != corev1.PodFailed || st == nil || st.ExitCode != 3 || st.Reason != "Error" {
		t.Errorf("fails: phase %s, state %+v", p.Status.Phase, p.Status.ContainerStatuses[0].State)
	}
	p = waitPod(t, ctx, ns, "flaky", "finished", finished)
	st := p.Status.ContainerStatuses[0]
	if p.Status.Phase != corev1.PodSucceeded || st.RestartCount != 1 || st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("flaky: phase %s, status %+v", p.Status.Phase, st)
	}
	if got := kubeletLogs(t, ns, "flaky", "c", ""); got != "second\n" {
		t.Errorf("flaky current log %q", got)
	}
	if got := kubeletLogs(t, ns, "flaky", "c", "previous=true"); got != "first\n" {
		t.Errorf("flaky previous log %q", got)
	}
	p = waitPod(t, ctx, ns, "nocmd", "finished", finished)
	if st := p.Status.ContainerStatuses[0].State.Terminated; p.Status.Phase != corev1.PodFailed || st == nil || st.ExitCode != 128 || st.Reason != "StartError" {
		t.Errorf("nocmd: phase %s, state %+v", p.Status.Phase, p.Status.ContainerStatuses[0].State)
	}
}

func TestDeletionTerminatesAndPodsTalk(t *testing.T) {
	ctx := ctxT(t, 90*time.Second)
	const ns = "net"
	createNamespace(t, ctx, ns)
	// Two servers on the same port, each in its own network namespace; a client
	// reaches one of them by <hostname>.<subdomain>.
	server := `trap 'echo got-term; exit 0' TERM
python3 -c '
import socket
s = socket.socket(); s.bind(("0.0.0.0", 29500)); s.listen()
print("listening", flush=True)
c, a = s.accept(); print("hello from", a[0], c.recv(64).decode(), flush=True)
' &
wait $!
while true; do sleep 0.2; done`
	for _, name := range []string{"srv-a", "srv-b"} {
		p := shPod(ns, name, server, corev1.RestartPolicyNever)
		p.Spec.Hostname, p.Spec.Subdomain = name, "grp"
		grace := int64(20)
		p.Spec.TerminationGracePeriodSeconds = &grace
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"srv-a", "srv-b"} {
		waitPod(t, ctx, ns, name, "listening", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && strings.Contains(kubeletLogs(t, ns, name, "c", ""), "listening")
		})
	}
	cli := shPod(ns, "cli", `python3 -c '
import socket
s = socket.create_connection(("srv-b.grp", 29500), timeout=5); s.send(b"cli"); print("sent")'`, corev1.RestartPolicyNever)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, cli, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ctx, ns, "cli", "finished", finished)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("client: %s: %s", p.Status.Phase, kubeletLogs(t, ns, "cli", "c", ""))
	}
	waitPod(t, ctx, ns, "srv-b", "got the connection", func(*corev1.Pod) bool {
		return strings.Contains(kubeletLogs(t, ns, "srv-b", "c", ""), "hello from "+cli.Status.PodIP)
	})

	// Deleting runs the SIGTERM trap, and the pod is gone well before its grace period.
	start := time.Now()
	grace := int64(20)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "srv-a", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "srv-a", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("srv-a still there %s after deletion", time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("srv-a gone %s after the delete call", time.Since(start).Round(10*time.Millisecond))
}

func TestMissingConfigMapWaits(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "wait"
	createNamespace(t, ctx, ns)
	p := shPod(ns, "waits", "echo $V", corev1.RestartPolicyNever)
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "v"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ctx, ns, "waits", "CreateContainerConfigError", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string]string{"v": "arrived"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, ctx, ns, "waits", "finished", finished)
	if got.Status.Phase != corev1.PodSucceeded || kubeletLogs(t, ns, "waits", "c", "") != "arrived\n" {
		t.Errorf("phase %s, logs %q", got.Status.Phase, kubeletLogs(t, ns, "waits", "c", ""))
	}
}

// TestVolumeOverStateDir: a pod may mount a volume over a directory that holds
// the agent's state (an emptyDir on /tmp, as the MPI runtime's pods have, while
// the state lives below /tmp): its other volumes, bound from the state
// directory, must still be mounted, with the modes of their Secret items, and
// what the pod writes to /tmp stays in the pod.
func TestVolumeOverStateDir(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "overstate"
	createNamespace(t, ctx, ns)
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys"},
		Data: map[string][]byte{"private": []byte("p"), "public": []byte("q")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stateTop := "/" + strings.Split(strings.TrimPrefix(agentStateDir, "/"), "/")[0]
	marker := fmt.Sprintf("trainyard-it-marker-%d", time.Now().UnixNano())
	keys := fmt.Sprintf("/trainyard-it-keys-%d", time.Now().UnixNano())
	pod := shPod(ns, "over", fmt.Sprintf(`stat -c '%%a %%n' %[1]s/id %[1]s/id.pub %[1]s/authorized_keys
cat %[1]s/id %[1]s/authorized_keys; echo
touch %[2]s/%[3]s && ls %[2]s`, keys, stateTop, marker), corev1.RestartPolicyNever)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "keys", DefaultMode: ptr.To[int32](0o400),
			Items: []corev1.KeyToPath{
				{Key: "private", Path: "id", Mode: ptr.To[int32](0o640)},
				{Key: "public", Path: "id.pub", Mode: ptr.To[int32](0o644)},
				{Key: "public", Path: "authorized_keys"},
			},
		}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: stateTop}, {Name: "keys", MountPath: keys}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ctx, ns, "over", "finished", finished)
	logs := kubeletLogs(t, ns, "over", "c", "")
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phase %s, status %+v\nlogs: %s", p.Status.Phase, p.Status, logs)
	}
	want := fmt.Sprintf("640 %[1]s/id\n644 %[1]s/id.pub\n400 %[1]s/authorized_keys\npq\n%[2]s\n", keys, marker)
	if logs != want {
		t.Errorf("logs:\n%s\nwant:\n%s", logs, want)
	}
	if _, err := os.Stat(filepath.Join(stateTop, marker)); err == nil {
		t.Errorf("%s/%s was created on the host", stateTop, marker)
	}
}

// TestTCPReadinessProbe: a container with a tcpSocket readiness probe is not
// ready while its port is closed, and becomes ready once it listens; the
// probe connects from inside the pod's network namespace.
func TestTCPReadinessProbe(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "probe"
	createNamespace(t, ctx, ns)
	gate := hostPathDir(t)
	pod := shPod(ns, "listen", `echo waiting; while [ ! -e /gate/open ]; do sleep 0.1; done
exec python3 -c "import socket, time; s = socket.socket(); s.bind(('', 8080)); s.listen(); print('listening', flush=True); time.sleep(600)"`, corev1.RestartPolicyNever)
	pod.Spec.Volumes = []corev1.Volume{{Name: "gate", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: gate}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "gate", MountPath: "/gate"}}
	c.Ports = []corev1.ContainerPort{{Name: "svc", ContainerPort: 8080}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("svc")}}, PeriodSeconds: 1}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).Delete(context.Background(), "listen", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	running := func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	}
	p := waitPod(t, ctx, ns, "listen", "running", running)
	// Nothing listens before the gate opens: the pod cannot be ready yet.
	if podReady(p) || p.Status.ContainerStatuses[0].Ready {
		t.Fatalf("pod ready before its port is open: %+v", p.Status)
	}
	if err := os.WriteFile(filepath.Join(gate, "open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, ctx, ns, "listen", "ready", podReady)
	if !p.Status.ContainerStatuses[0].Ready {
		t.Errorf("pod Ready but its container not: %+v", p.Status.ContainerStatuses[0])
	}
	if logs := kubeletLogs(t, ns, "listen", "c", ""); logs != "waiting\nlistening\n" {
		t.Errorf("logs %q", logs)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
