package statusserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func TestDecide(t *testing.T) {
	ca := []byte("PEM")
	cases := map[string]struct {
		hasJobs, exists, current bool
		ca                       []byte
		want                     caAction
	}{
		"first job":              {hasJobs: true, ca: ca, want: caCreate},
		"current":                {hasJobs: true, exists: true, current: true, ca: ca, want: caNone},
		"CA rotated, or planted": {hasJobs: true, exists: true, ca: ca, want: caUpdate},
		"last job gone":          {exists: true, current: true, ca: ca, want: caDelete},
		"last job gone, no CA":   {exists: true, want: caDelete},
		"no job, nothing there":  {ca: ca, want: caNone},
		// Its first load queues every namespace again.
		"CA not loaded yet": {hasJobs: true, want: caNone},
	}
	for name, tc := range cases {
		if got := decide(tc.hasJobs, tc.exists, tc.current, tc.ca); got != tc.want {
			t.Errorf("%s: decide = %q, want %q", name, got, tc.want)
		}
	}
}

// TestReconcile runs the publisher's passes on a fake client; the
// integration test (test/integration/statusserver) runs it in a manager on a
// real API server with the manager's ClusterRole.
func TestReconcile(t *testing.T) {
	s := testScheme(t)
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(job).WithReturnManagedFields().Build()
	path := filepath.Join(t.TempDir(), "ca.crt")
	write := func(pem string) {
		if err := os.WriteFile(path, []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	testCA, testCA2 := selfSigned(t, "one"), selfSigned(t, "two")
	write(testCA)
	bundle := &CABundle{Path: path, Log: logr.Discard()}
	if err := bundle.Load(); err != nil {
		t.Fatal(err)
	}
	p := &CAPublisher{Client: c, CA: bundle, Log: logr.Discard()}
	key := types.NamespacedName{Namespace: "team", Name: CAConfigMapName}
	pass := func() {
		t.Helper()
		if _, err := p.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	get := func() (map[string]string, error) {
		var cm corev1.ConfigMap
		err := c.Get(context.Background(), key, &cm)
		return cm.Data, err
	}

	pass()
	data, err := get()
	if err != nil {
		t.Fatalf("after the first job: %v", err)
	}
	if diff := cmp.Diff(map[string]string{CAKey: testCA}, data); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}

	changed := bundle.Changed()
	write(testCA2)
	if err := bundle.Load(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Error("Changed not closed after the CA changed")
	}
	pass()
	if data, _ := get(); data[CAKey] != testCA2 {
		t.Errorf("after rotation: %q, want the new CA", data[CAKey])
	}

	// Someone plants another CA, keeping the label and the hash annotation
	// (the cache holds no data): the publisher reads it and repairs it.
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), key, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[CAKey] = testCA
	if err := c.Update(context.Background(), &cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	pass()
	if data, _ := get(); data[CAKey] != testCA2 {
		t.Errorf("after a planted CA: %q, want the CA repaired", data[CAKey])
	}

	if err := c.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	pass()
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Errorf("after the last job: %v, want NotFound", err)
	}
	pass() // nothing left to do
}

// TestReconcileLeavesOthersAlone: a ConfigMap of the CA's name, labelled as
// the manager's, that a user made is neither deleted (a namespace without
// TrainJobs) nor patched (a namespace with one).
func TestReconcileLeavesOthersAlone(t *testing.T) {
	s := testScheme(t)
	planted := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CAConfigMapName,
			Labels: map[string]string{"trainyard.io/managed-by": "trainyard"}}, Data: map[string]string{CAKey: "their CA"}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithReturnManagedFields().
		WithObjects(&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "with-job"}}).Build()
	for _, ns := range []string{"with-job", "without-job"} {
		if err := c.Create(context.Background(), planted(ns), client.FieldOwner("kubectl-create")); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, []byte(selfSigned(t, "one")), 0o600); err != nil {
		t.Fatal(err)
	}
	bundle := &CABundle{Path: path, Log: logr.Discard()}
	if err := bundle.Load(); err != nil {
		t.Fatal(err)
	}
	p := &CAPublisher{Client: c, CA: bundle, Log: logr.Discard()}
	for _, ns := range []string{"with-job", "without-job"} {
		key := types.NamespacedName{Namespace: ns, Name: CAConfigMapName}
		for range 2 {
			if _, err := p.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatalf("%s: %v", ns, err)
			}
		}
		var cm corev1.ConfigMap
		if err := c.Get(context.Background(), key, &cm); err != nil {
			t.Errorf("%s: the user's ConfigMap: %v, want it left", ns, err)
		} else if cm.Data[CAKey] != "their CA" {
			t.Errorf("%s: the user's ConfigMap holds %q, want it unchanged", ns, cm.Data[CAKey])
		}
	}
}

// TestCAKeysOf: a CA change queues each namespace that has TrainJobs or a CA
// ConfigMap, once.
func TestCAKeysOf(t *testing.T) {
	s := testScheme(t)
	objs := []client.Object{
		&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "one"}},
		&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "one"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: CAConfigMapName, Namespace: "two"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "three"}},
	}
	p := &CAPublisher{Client: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()}
	got, err := p.namespaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range got {
		if r.Name != CAConfigMapName {
			t.Errorf("request %v: want the CA ConfigMap's name", r)
		}
		seen[r.Namespace] = true
	}
	if diff := cmp.Diff(map[string]bool{"one": true, "two": true}, seen); diff != "" || len(got) != 2 {
		t.Errorf("namespaces (-want +got):\n%s (%d requests)", diff, len(got))
	}
}

// testScheme has the kinds the publisher reads: core and TrainJobs.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// selfSigned is a PEM CA certificate named cn.
func selfSigned(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
