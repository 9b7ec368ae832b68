package localcluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
)

const webhooksYAML = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mpod.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  namespaceSelector:
    matchExpressions: [{key: service, operator: NotIn, values: [service]}]
---
apiVersion: v1
kind: Service
metadata: {name: webhook-service, namespace: system}
spec: {ports: [{port: 443}]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: kueue-validating-webhook-configuration}
webhooks:
- name: vjob.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-batch-v1-job}
`

// A CRD whose schema has properties called service and clientConfig, like Kueue's
// Workload CRD: only spec.conversion.webhook.clientConfig may change.
const crdYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: workloads.kueue.x-k8s.io}
spec:
  group: kueue.x-k8s.io
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: webhook-service, namespace: system, path: /convert}
      conversionReviewVersions: [v1]
  versions:
  - name: v1beta2
    schema:
      openAPIV3Schema:
        properties:
          service: {type: string}
          clientConfig:
            properties:
              service: {type: object}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: jobsets.jobset.x-k8s.io}
spec:
  group: jobset.x-k8s.io
  versions: [{name: v1alpha2}]
`

func TestLocalWebhookConfigurations(t *testing.T) {
	objs, err := decodeYAML([]byte(webhooksYAML))
	if err != nil {
		t.Fatal(err)
	}
	orig := objs[0].DeepCopy()
	out, err := localWebhookConfigurations(objs, "kueue-", webhookClientConfig{port: 1234, caBundle: []byte("CA")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("got %d objects, want the 2 webhook configurations", len(out))
	}
	if got := out[0].GetName(); got != "kueue-mutating-webhook-configuration" {
		t.Errorf("name %q", got)
	}
	if got := out[1].GetName(); got != "kueue-validating-webhook-configuration" {
		t.Errorf("already-prefixed name changed to %q", got)
	}
	hooks, _, _ := unstructured.NestedSlice(out[0].Object, "webhooks")
	cc := hooks[0].(map[string]interface{})["clientConfig"]
	want := map[string]interface{}{"url": "https://127.0.0.1:1234/mutate--v1-pod", "caBundle": "Q0E="}
	if !reflect.DeepEqual(cc, want) {
		t.Errorf("clientConfig = %v, want %v", cc, want)
	}
	// Everything but clientConfig and the name is as it was.
	origHooks, _, _ := unstructured.NestedSlice(orig.Object, "webhooks")
	delete(origHooks[0].(map[string]interface{}), "clientConfig")
	delete(hooks[0].(map[string]interface{}), "clientConfig")
	if !reflect.DeepEqual(origHooks, hooks) {
		t.Errorf("webhook changed beyond clientConfig:\n%v\n%v", origHooks, hooks)
	}
	if !reflect.DeepEqual(objs[0], orig) {
		t.Errorf("input object was modified")
	}
}

func TestLocalConversion(t *testing.T) {
	objs, err := decodeYAML([]byte(crdYAML))
	if err != nil {
		t.Fatal(err)
	}
	out, err := localConversion(objs, webhookClientConfig{port: 99, caBundle: []byte("CA")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("got %d CRDs", len(out))
	}
	cc, _, _ := unstructured.NestedMap(out[0].Object, "spec", "conversion", "webhook", "clientConfig")
	if want := map[string]interface{}{"url": "https://127.0.0.1:99/convert", "caBundle": "Q0E="}; !reflect.DeepEqual(cc, want) {
		t.Errorf("conversion clientConfig = %v, want %v", cc, want)
	}
	before, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "versions")
	after, _, _ := unstructured.NestedSlice(out[0].Object, "spec", "versions")
	if !reflect.DeepEqual(before, after) {
		t.Errorf("schema changed")
	}
	if !reflect.DeepEqual(objs[1].Object, out[1].Object) {
		t.Errorf("CRD without conversion changed")
	}
}

func TestPKI(t *testing.T) {
	p := pki{dir: filepath.Join(t.TempDir(), "pki"), hostIPs: []net.IP{net.ParseIP("192.0.2.2")}}
	if err := p.generate(); err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(p.caCert())
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad CA")
	}
	for _, x := range []struct {
		cert, key, host string
		usage           x509.ExtKeyUsage
		org             string
	}{
		{p.apiserverCert(), p.apiserverKey(), "127.0.0.1", x509.ExtKeyUsageServerAuth, ""},
		{p.apiserverCert(), p.apiserverKey(), "kubernetes.default.svc", x509.ExtKeyUsageServerAuth, ""},
		{p.apiserverCert(), p.apiserverKey(), "localhost", x509.ExtKeyUsageServerAuth, ""},
		{p.apiserverCert(), p.apiserverKey(), "192.0.2.2", x509.ExtKeyUsageServerAuth, ""},
		{p.servingCert(), p.servingKey(), "127.0.0.1", x509.ExtKeyUsageServerAuth, ""},
		// The status server's URL: process nodes' pods, container nodes' pods.
		{p.servingCert(), p.servingKey(), ProcessHostAddress, x509.ExtKeyUsageServerAuth, ""},
		{p.servingCert(), p.servingKey(), "192.0.2.2", x509.ExtKeyUsageServerAuth, ""},
		{p.adminCert(), p.adminKey(), "", x509.ExtKeyUsageClientAuth, "system:masters"},
	} {
		pair, err := tls.LoadX509KeyPair(x.cert, x.key)
		if err != nil {
			t.Fatalf("%s: %v", x.cert, err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: x.host, KeyUsages: []x509.ExtKeyUsage{x.usage}}); err != nil {
			t.Errorf("%s for %q: %v", x.cert, x.host, err)
		}
		if x.org != "" && (len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != x.org) {
			t.Errorf("%s: organization %v", x.cert, leaf.Subject.Organization)
		}
	}
	pub, _ := os.ReadFile(p.saPub())
	if b, _ := pem.Decode(pub); b == nil || b.Type != "PUBLIC KEY" {
		t.Errorf("bad service-account public key")
	}
}

func TestFreePortsDistinct(t *testing.T) {
	p, err := freePorts()
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(p)
	seen := map[int64]bool{}
	for i := 0; i < v.NumField(); i++ {
		n := v.Field(i).Int()
		if n == 0 || seen[n] {
			t.Errorf("port %d of %s is zero or repeated", n, v.Type().Field(i).Name)
		}
		// Below the ephemeral range, where no outgoing connection takes it.
		if low, high := portRange(); n < int64(low) || n >= int64(high) {
			t.Errorf("port %d of %s is outside [%d, %d)", n, v.Type().Field(i).Name, low, high)
		}
		seen[n] = true
	}
}

func TestProcAliveIgnoresRecycledPID(t *testing.T) {
	st, state, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if state == 'Z' || !procAlive(os.Getpid(), st) {
		t.Fatalf("this process is not alive?")
	}
	if procAlive(os.Getpid(), st+1) {
		t.Errorf("a different start time must not match")
	}
}

// TestComponentsDieWithTheirParent checks that, without Detach, a component is
// killed when the process that started it dies without calling Down (a test binary
// killed by its timeout), and that a detached one survives and is stopped by
// DownStateDir from another process.
func TestComponentsDieWithTheirParent(t *testing.T) {
	if dir := os.Getenv("CLUSTER_TEST_HELPER_DIR"); dir != "" {
		s := &supervisor{dir: dir, st: &state{}, exits: map[int]chan struct{}{}, detach: os.Getenv("CLUSTER_TEST_HELPER_DETACH") != ""}
		if _, err := s.start("sleeper", []string{"/bin/sleep", "300"}, false); err != nil {
			t.Fatal(err)
		}
		select {} // until killed
	}
	for _, detach := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
		helper := exec.Command(os.Args[0], "-test.run=^TestComponentsDieWithTheirParent$")
		helper.Env = append(os.Environ(), "CLUSTER_TEST_HELPER_DIR="+dir)
		if detach {
			helper.Env = append(helper.Env, "CLUSTER_TEST_HELPER_DETACH=1")
		}
		if err := helper.Start(); err != nil {
			t.Fatal(err)
		}
		var st *state
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			if st, err = readState(dir); err == nil && len(st.Processes) == 1 {
				break
			}
			if time.Now().After(deadline) {
				_ = helper.Process.Kill()
				t.Fatalf("helper did not start its process: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		p := st.Processes[0]
		if !procAlive(p.PID, p.StartTime) {
			t.Fatalf("sleeper not running")
		}
		_ = helper.Process.Kill()
		_ = helper.Wait()
		wait := 10 * time.Second // for the kill to land
		if detach {
			wait = time.Second // to be fairly sure it does not
		}
		gone := waitGone(p, wait)
		if !detach && !gone {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			t.Errorf("sleeper (pid %d) outlived its parent", p.PID)
		}
		if detach {
			if gone {
				t.Fatalf("detached sleeper died with its parent")
			}
			if err := DownStateDir(dir); err != nil {
				t.Fatal(err)
			}
			if procAlive(p.PID, p.StartTime) {
				t.Errorf("DownStateDir left pid %d running", p.PID)
			}
		}
	}
}

// TestKueueFrameworksFor: Kueue's TrainJob integration runs in trainjob mode
// only, and the defaults are never changed through the result.
func TestKueueFrameworksFor(t *testing.T) {
	if got, want := KueueFrameworksFor(kueue.ModeTrainJob), []string{"batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"}; !reflect.DeepEqual(got, want) {
		t.Errorf("trainjob mode: %v, want %v", got, want)
	}
	got := KueueFrameworksFor(kueue.ModeJobSet)
	if want := []string{"batch/job", "jobset.x-k8s.io/jobset"}; !reflect.DeepEqual(got, want) {
		t.Errorf("jobset mode: %v, want %v", got, want)
	}
	got[0] = "changed"
	if DefaultKueueFrameworks[0] != "batch/job" {
		t.Errorf("DefaultKueueFrameworks changed through the result: %v", DefaultKueueFrameworks)
	}
}

// TestReadyMessage: the cluster's last progress line says what it installed;
// without the manager it installed no roles.
func TestReadyMessage(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Runtimes: []string{"a.yaml", "b.yaml"}}, "cluster ready: 2 runtimes and the users' roles installed, nodes Ready"},
		{Options{ExternalManager: true, Runtimes: []string{}},
			"cluster ready without the manager (no Trainyard CRDs, webhooks or users' roles: install the chart or an overlay), 0 runtimes installed, nodes Ready"},
	} {
		if diff := cmp.Diff(tc.want, tc.o.readyMessage()); diff != "" {
			t.Errorf("ExternalManager %v (-want +got):\n%s", tc.o.ExternalManager, diff)
		}
	}
}
