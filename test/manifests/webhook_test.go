package manifests

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/test/prereq"
)

// kubeflowV1Resources are the kubeflow.org/v1 kinds Trainyard serves.
var kubeflowV1Resources = []string{"pytorchjobs", "mpijobs", "xgboostjobs"}

// injectCAFrom is the annotation by which cert-manager's CA injector fills in
// the caBundle of a webhook configuration from a Certificate's Secret.
const injectCAFrom = "cert-manager.io/inject-ca-from"

// webhookTimeout is the timeoutSeconds of every webhook: the markers' in
// pkg/webhooks, and the chart's default webhook.timeoutSeconds.
const webhookTimeout = 10

// managerWebhookConfigurations returns the names of the webhook configurations
// that the manager injects its CA bundle into, from the constants
// mutatingWebhookConfiguration and validatingWebhookConfiguration in
// cmd/trainyard-manager.
func managerWebhookConfigurations(t *testing.T) (mutating, validating string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "cmd", "trainyard-manager", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	re := regexp.MustCompile(`(?m)^\s*(mutatingWebhookConfiguration|validatingWebhookConfiguration)\s*=\s*"([^"]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = m[2]
		}
	}
	mutating, validating = names["mutatingWebhookConfiguration"], names["validatingWebhookConfiguration"]
	if mutating == "" || validating == "" {
		t.Fatalf("cannot find the constants mutatingWebhookConfiguration and validatingWebhookConfiguration in cmd/trainyard-manager (found %v); update this test to where the manager names the webhook configurations it injects the CA into", names)
	}
	return mutating, validating
}

// webhook is one webhook of a mutating or validating configuration.
type webhook struct {
	config                  doc
	name                    string
	clientConfig            admissionregistrationv1.WebhookClientConfig
	rules                   []admissionregistrationv1.RuleWithOperations
	failurePolicy           *admissionregistrationv1.FailurePolicyType
	timeoutSeconds          *int32
	sideEffects             *admissionregistrationv1.SideEffectClass
	admissionReviewVersions []string
}

func (w webhook) String() string { return fmt.Sprintf("%s: webhook %s", w.config, w.name) }

// webhooksIn returns the webhooks of every configuration in docs.
func webhooksIn(t *testing.T, docs []doc) []webhook {
	t.Helper()
	var out []webhook
	for _, d := range docs {
		switch d.kind() {
		case "MutatingWebhookConfiguration":
			for _, w := range decodeInto[admissionregistrationv1.MutatingWebhookConfiguration](t, d).Webhooks {
				out = append(out, webhook{d, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.TimeoutSeconds, w.SideEffects, w.AdmissionReviewVersions})
			}
		case "ValidatingWebhookConfiguration":
			for _, w := range decodeInto[admissionregistrationv1.ValidatingWebhookConfiguration](t, d).Webhooks {
				out = append(out, webhook{d, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.TimeoutSeconds, w.SideEffects, w.AdmissionReviewVersions})
			}
		}
	}
	return out
}

// checkWebhookPolicies checks what each webhook must declare, wherever it
// points: that it fails closed, waits for an answer no longer than the
// 10 seconds of webhookTimeout (a hung replica must not hold API requests for
// the 30 s maximum), has no side effects, speaks admission/v1, and
// only intercepts Trainyard's own API group and the legacy PyTorchJob it
// serves, so that a manager that is down blocks nothing else in the cluster
// (not the other kubeflow.org/v1 kinds, which Trainyard does not run).
func checkWebhookPolicies(t *testing.T, hooks []webhook) {
	t.Helper()
	if len(hooks) == 0 {
		t.Fatal("no webhooks found")
	}
	seen := map[string]bool{}
	for _, w := range hooks {
		if seen[w.name] {
			t.Errorf("%s: duplicate webhook name", w)
		}
		seen[w.name] = true
		if w.failurePolicy == nil || *w.failurePolicy != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail", w, deref(w.failurePolicy))
		}
		if w.timeoutSeconds == nil || *w.timeoutSeconds != webhookTimeout {
			t.Errorf("%s: timeoutSeconds %v, want %d", w, deref(w.timeoutSeconds), webhookTimeout)
		}
		if w.sideEffects == nil || *w.sideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %v, want None", w, deref(w.sideEffects))
		}
		if !slices.Contains(w.admissionReviewVersions, "v1") {
			t.Errorf("%s: admissionReviewVersions %q lack v1", w, w.admissionReviewVersions)
		}
		if len(w.rules) == 0 {
			t.Errorf("%s: no rules", w)
		}
		for i, r := range w.rules {
			switch {
			case slices.Equal(r.APIGroups, []string{"trainer.kubeflow.org"}):
			case slices.Equal(r.APIGroups, []string{"kubeflow.org"}):
				if len(r.Resources) != 1 || !slices.Contains(kubeflowV1Resources, r.Resources[0]) || !slices.Equal(r.APIVersions, []string{"v1"}) {
					t.Errorf("%s: rule %d intercepts kubeflow.org %q %q; of that group Trainyard serves only v1 %v, one a rule", w, i, r.APIVersions, r.Resources, kubeflowV1Resources)
				}
			default:
				t.Errorf("%s: rule %d intercepts API groups %q; only trainer.kubeflow.org and kubeflow.org (the v1 kinds) are Trainyard's", w, i, r.APIGroups)
			}
			for _, v := range slices.Concat(r.APIVersions, r.Resources) {
				if strings.Contains(v, "*") {
					t.Errorf("%s: rule %d: wildcard %q", w, i, v)
				}
			}
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// TestWebhookPolicies checks the webhooks in the generated
// manifests/base/webhook/manifests.yaml (no kubectl needed).
func TestWebhookPolicies(t *testing.T) {
	checkWebhookPolicies(t, webhooksIn(t, base(t).docs))
}

// TestWebhookConfigurations renders the base and checks the webhook
// configurations as installed: renamed to the names the manager injects its CA
// bundle into, each webhook pointing at the trainyard-webhook Service, and
// that Service reaching the manager's webhook server.
func TestWebhookConfigurations(t *testing.T) {
	docs := render(t, "manifests/base")
	mutating, validating := managerWebhookConfigurations(t)
	if mutating != mutatingWebhookName || validating != validatingWebhookName {
		t.Errorf("the manager injects its CA into %q and %q, but the manifests name the configurations %q and %q",
			mutating, validating, mutatingWebhookName, validatingWebhookName)
	}
	var configs []string
	for _, d := range docs {
		if k := d.kind(); k == "MutatingWebhookConfiguration" || k == "ValidatingWebhookConfiguration" {
			configs = append(configs, k+"/"+d.name())
		}
	}
	slices.Sort(configs)
	want := []string{"MutatingWebhookConfiguration/" + mutatingWebhookName, "ValidatingWebhookConfiguration/" + validatingWebhookName}
	if diff := cmp.Diff(want, configs); diff != "" {
		t.Errorf("webhook configurations in the rendered base (-want +got):\n%s", diff)
	}

	hooks := webhooksIn(t, docs)
	checkWebhookPolicies(t, hooks)
	for _, w := range hooks {
		cc := w.clientConfig
		if cc.URL != nil {
			t.Errorf("%s: clientConfig.url %q; webhooks must go through the Service", w, *cc.URL)
		}
		if len(cc.CABundle) > 0 {
			t.Errorf("%s: clientConfig.caBundle is set; the manager (or cert-manager) injects it", w)
		}
		s := cc.Service
		if s == nil {
			t.Errorf("%s: no clientConfig.service", w)
			continue
		}
		if s.Name != webhookService || s.Namespace != systemNamespace {
			t.Errorf("%s: calls Service %s/%s, want %s/%s", w, s.Namespace, s.Name, systemNamespace, webhookService)
		}
		// Unset, the API server defaults the port to 443.
		if s.Port != nil && *s.Port != 443 {
			t.Errorf("%s: Service port %d, want 443", w, *s.Port)
		}
		if s.Path == nil || !strings.HasPrefix(*s.Path, "/") {
			t.Errorf("%s: clientConfig.service.path %v must be an absolute path", w, deref(s.Path))
		}
	}

	// The Service sends 443 to the manager's webhook server, and its DNS name
	// is the one the serving certificate is issued for.
	dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
	svc := decodeInto[corev1.Service](t, findIn(t, docs, "Service", webhookService))
	if svc.Namespace != systemNamespace {
		t.Errorf("Service %s: namespace %q, want %q", webhookService, svc.Namespace, systemNamespace)
	}
	checkService(t, svc, dep, 443, webhookPort)
	if name := managerFlagValue(t, containerArgs(dep.Spec.Template.Spec.Containers[0]), "webhook-service-name"); name != "" && name != webhookService {
		t.Errorf("the manager issues its certificate for Service %q, but the webhooks call %q", name, webhookService)
	}
}

// TestGeneratedWebhooksUpToDate regenerates the webhook configurations with
// controller-gen and compares them with manifests/base/webhook/manifests.yaml.
func TestGeneratedWebhooksUpToDate(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join(repoRoot, "bin", "controller-gen"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(bin)
	prereq.Requiref(t, !errors.Is(err, fs.ErrNotExist), "controller-gen not found at %s; install the pinned controller-gen (v0.20.1) there (`make generate` builds it) to check that manifests/base/webhook/manifests.yaml is up to date", bin)
	out := t.TempDir()
	cmd := exec.Command(bin, "webhook", "paths=./pkg/controller/...", "output:webhook:artifacts:config="+out)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	generated, err := os.ReadFile(filepath.Join(out, "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "base", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(generated), string(committed)); diff != "" {
		t.Errorf("manifests/base/webhook/manifests.yaml is out of date with the +kubebuilder:webhook markers; regenerate it with\n  %s\n(-generated +committed):\n%s", regenerateWebhooks, diff)
	}
}

// certificate holds the fields of a cert-manager Certificate this test reads.
type certificate struct {
	Spec struct {
		SecretName string   `json:"secretName"`
		CommonName string   `json:"commonName"`
		DNSNames   []string `json:"dnsNames"`
		IsCA       bool     `json:"isCA"`
		Duration   string   `json:"duration"`
		IssuerRef  struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
		PrivateKey struct {
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
	} `json:"spec"`
}

// issuer holds the fields of a cert-manager Issuer this test reads.
type issuer struct {
	Spec struct {
		SelfSigned *struct{} `json:"selfSigned"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca"`
	} `json:"spec"`
}

// checkWebhookCAChain checks the webhook certificate that cert-manager issues
// when no issuer of the user's is named (the cert-manager overlay, the chart's
// webhook.certManager.enabled): a CA of its own, so that renewing the serving
// certificate, with a new key each time, keeps the trust anchor the API server
// has. A self-signed Issuer issues a long-lived CA Certificate that keeps its
// key when renewed; a CA Issuer signs the serving Certificate, for the webhook
// Service in namespace ns, with that CA; and the CA injector fills both webhook
// configurations from the CA Certificate, not from the serving one. It returns
// the serving Certificate.
func checkWebhookCAChain(t *testing.T, docs []doc, ns, clusterDomain string) certificate {
	t.Helper()
	certs := map[string]certificate{}
	issuers := map[string]issuer{}
	for _, d := range docs {
		switch d.kind() {
		case "Certificate":
			var c certificate
			if err := yaml.UnmarshalStrict(d.json, &struct {
				certificate `json:",inline"`
				APIVersion  string         `json:"apiVersion"`
				Kind        string         `json:"kind"`
				Metadata    map[string]any `json:"metadata"`
			}{}); err != nil {
				t.Errorf("%s: fields this test does not know: %v", d, err)
			}
			if err := yaml.Unmarshal(d.json, &c); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			certs[d.name()] = c
		case "Issuer":
			var i issuer
			if err := yaml.Unmarshal(d.json, &i); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			issuers[d.name()] = i
		}
	}
	if len(certs) != 2 || len(issuers) != 2 {
		t.Fatalf("Certificates %v and Issuers %v: want two of each (the CA and the serving certificate; a self-signed and a CA Issuer)", slices.Sorted(maps.Keys(certs)), slices.Sorted(maps.Keys(issuers)))
	}
	localIssuer := func(what string, c certificate) (string, issuer) {
		t.Helper()
		ref := c.Spec.IssuerRef
		if (ref.Kind != "" && ref.Kind != "Issuer") || (ref.Group != "" && ref.Group != "cert-manager.io") {
			t.Errorf("%s: issuerRef %+v, want an Issuer of the same namespace", what, ref)
		}
		i, ok := issuers[ref.Name]
		if !ok {
			t.Errorf("%s: issuerRef names Issuer %q, which is not rendered", what, ref.Name)
		}
		return ref.Name, i
	}

	// The serving certificate, in the Secret the Deployment mounts, for the
	// name the API server calls, signed by a CA Issuer.
	serving, ok := certs[webhookSecret]
	if !ok {
		t.Fatalf("no Certificate %s (the serving certificate)", webhookSecret)
	}
	if serving.Spec.SecretName != webhookSecret {
		t.Errorf("Certificate %s: secretName %q, want %q (the Secret the Deployment mounts)", webhookSecret, serving.Spec.SecretName, webhookSecret)
	}
	svc := webhookService + "." + ns + ".svc"
	if want := []string{svc, svc + "." + clusterDomain}; !slices.Equal(serving.Spec.DNSNames, want) {
		t.Errorf("Certificate %s: dnsNames %q, want %q", webhookSecret, serving.Spec.DNSNames, want)
	}
	if serving.Spec.IsCA {
		t.Errorf("Certificate %s: the serving certificate must not be a CA", webhookSecret)
	}
	if p := serving.Spec.PrivateKey.RotationPolicy; p != "Always" {
		t.Errorf("Certificate %s: privateKey.rotationPolicy %q, want Always (a new key with each renewal)", webhookSecret, p)
	}
	caIssuerName, caIssuer := localIssuer("Certificate "+webhookSecret, serving)
	if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName == "" {
		t.Fatalf("Issuer %s, which signs the serving certificate, is no CA Issuer: %+v", caIssuerName, caIssuer.Spec)
	}

	// The CA, in the Secret the CA Issuer signs with.
	var caName string
	for name, c := range certs {
		if c.Spec.SecretName == caIssuer.Spec.CA.SecretName {
			caName = name
		}
	}
	ca, ok := certs[caName]
	if !ok || caName == webhookSecret {
		t.Fatalf("no CA Certificate writes Secret %s, the CA of Issuer %s", caIssuer.Spec.CA.SecretName, caIssuerName)
	}
	if !ca.Spec.IsCA {
		t.Errorf("Certificate %s: isCA false, want true", caName)
	}
	if d, err := time.ParseDuration(ca.Spec.Duration); err != nil || d < 5*365*24*time.Hour {
		t.Errorf("Certificate %s: duration %q (%v), want years: each CA renewal changes the trust anchor", caName, ca.Spec.Duration, err)
	}
	if p := ca.Spec.PrivateKey.RotationPolicy; p != "Never" {
		t.Errorf("Certificate %s: privateKey.rotationPolicy %q, want Never: with the same key, serving certificates signed before a CA renewal still verify", caName, p)
	}
	if name, i := localIssuer("Certificate "+caName, ca); i.Spec.SelfSigned == nil {
		t.Errorf("Issuer %s, which issues the CA, is not self-signed: %+v", name, i.Spec)
	}

	// The CA injector copies the CA, not the serving certificate's issuer
	// chain of the moment, into both configurations.
	inject := ns + "/" + caName
	n := 0
	for _, d := range docs {
		if k := d.kind(); k != "MutatingWebhookConfiguration" && k != "ValidatingWebhookConfiguration" {
			continue
		}
		n++
		ann, _ := meta(d.obj)["annotations"].(map[string]any)
		if v := str(ann[injectCAFrom]); v != inject {
			t.Errorf("%s: annotation %s=%q, want %q (the CA Certificate)", d, injectCAFrom, v, inject)
		}
	}
	if n != 2 {
		t.Errorf("%d webhook configurations, want 2", n)
	}
	return serving
}

// TestCertManagerOverlay renders manifests/overlays/cert-manager and checks
// that it is the standalone install with the certificate from cert-manager:
// a CA chain (checkWebhookCAChain) for the webhook Service, the serving
// certificate written to the mounted Secret, the CA injected into both webhook
// configurations, the manager started with --cert-management=external, and
// neither the placeholder Secret nor the RBAC of the built-in rotation, which
// it no longer needs. Nothing else may differ from the standalone overlay.
func TestCertManagerOverlay(t *testing.T) {
	docs := render(t, "manifests/overlays/cert-manager")
	standalone := render(t, "manifests/overlays/standalone")
	got := checkRendered(t, docs)

	removed := map[string]bool{
		"Secret/" + webhookSecret:                true,
		"Role/" + certRotationRole:               true,
		"RoleBinding/" + certRotationRole:        true,
		"ClusterRole/" + certRotationRole:        true,
		"ClusterRoleBinding/" + certRotationRole: true,
	}
	want := map[string]bool{}
	for _, d := range standalone {
		if key := d.kind() + "/" + d.name(); !removed[key] {
			want[key] = true
		}
	}
	for _, d := range docs {
		if _, ok := certManagerKinds[d.kind()]; ok {
			want[d.kind()+"/"+d.name()] = true
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects of the cert-manager overlay (-standalone without the built-in rotation's objects, plus cert-manager's +rendered):\n%s", diff)
	}
	checkWebhookCAChain(t, docs, systemNamespace, "cluster.local")

	// The manager uses the mounted certificate.
	dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
	c := dep.Spec.Template.Spec.Containers[0]
	var certManagement []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--cert-management=") || strings.HasPrefix(a, "-cert-management=") || a == "--cert-management" {
			certManagement = append(certManagement, a)
		}
	}
	if diff := cmp.Diff([]string{"--cert-management=external"}, certManagement); diff != "" {
		t.Errorf("manager args for the certificate (-want +got):\n%s", diff)
	}

	// Apart from that, every object is as in the standalone overlay.
	for _, s := range standalone {
		if removed[s.kind()+"/"+s.name()] {
			continue
		}
		var o doc
		for _, d := range docs {
			if d.kind() == s.kind() && d.name() == s.name() && d.namespace() == s.namespace() {
				o = d
			}
		}
		if o.obj == nil {
			continue // reported above
		}
		got := withoutCertManager(t, o)
		want := withoutCertManager(t, s)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s differs from the standalone overlay by more than the certificate settings (-standalone +cert-manager):\n%s", o, diff)
		}
	}
}

// withoutCertManager returns a copy of an object without what the cert-manager
// overlay adds to it: the --cert-management=external argument and the CA
// injection annotation.
func withoutCertManager(t *testing.T, d doc) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(d.json, &obj); err != nil {
		t.Fatal(err)
	}
	if m := meta(obj); m != nil {
		if ann, ok := m["annotations"].(map[string]any); ok {
			delete(ann, injectCAFrom)
			if len(ann) == 0 {
				delete(m, "annotations")
			}
		}
	}
	if d.kind() == "Deployment" {
		spec, _ := obj["spec"].(map[string]any)
		tmpl, _ := spec["template"].(map[string]any)
		podSpec, _ := tmpl["spec"].(map[string]any)
		containers, _ := podSpec["containers"].([]any)
		for _, c := range containers {
			c, _ := c.(map[string]any)
			args, _ := c["args"].([]any)
			c["args"] = slices.DeleteFunc(args, func(a any) bool { return a == "--cert-management=external" })
		}
	}
	return obj
}
