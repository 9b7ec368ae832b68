package manifests

import (
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// managerFlags returns the flags that the manager binary accepts, with their
// defaults ("" if none is shown), from its -h output. It builds the binary, so
// it is not called with -short.
var managerFlags = sync.OnceValues(func() (map[string]string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "trainyard-manifests-test")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "trainyard-manager")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/trainyard-manager")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/trainyard-manager: %w\n%s", err, out)
	}
	// -h prints the usage and exits (0 or 2 depending on the flag set). Flag
	// defaults may come from the environment (--namespace from POD_NAMESPACE),
	// so run it without that.
	help := exec.Command(bin, "-h")
	help.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "POD_NAMESPACE=") })
	out, _ := help.CombinedOutput()
	return parseFlagUsage(string(out))
})

var (
	// The flag package prints each flag as "  -name type", then its usage on
	// lines indented with "    \t", the last of which ends in the default.
	flagNameRE    = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)`)
	flagDefaultRE = regexp.MustCompile(`\(default (.*)\)$`)
)

// parseFlagUsage reads the flags and their defaults from the output of -h.
func parseFlagUsage(usage string) (map[string]string, error) {
	flags := map[string]string{}
	current := ""
	for _, line := range strings.Split(usage, "\n") {
		if m := flagNameRE.FindStringSubmatch(line); m != nil {
			current = m[1]
			flags[current] = ""
		}
		if m := flagDefaultRE.FindStringSubmatch(line); m != nil && current != "" {
			def := m[1]
			if unquoted, err := strconv.Unquote(def); err == nil {
				def = unquoted
			}
			flags[current] = def
		}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("no flags in the output of trainyard-manager -h:\n%s", usage)
	}
	return flags, nil
}

// containerArgs maps the --name=value arguments of a container to their
// values ("" for a bare --name).
func containerArgs(c corev1.Container) map[string]string {
	args := map[string]string{}
	for _, a := range c.Args {
		name, val, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		args[name] = val
	}
	return args
}

// managerFlagValue returns the value the manager runs with for a flag: its
// argument in args if there is one, otherwise the manager's default. With
// -short the defaults are unknown, and it returns "" for a flag not in args.
func managerFlagValue(t *testing.T, args map[string]string, name string) string {
	t.Helper()
	if v, ok := args[name]; ok {
		return v
	}
	if testing.Short() {
		return ""
	}
	flags, err := managerFlags()
	if err != nil {
		t.Errorf("reading the manager's flags: %v", err)
		return ""
	}
	def, ok := flags[name]
	if !ok {
		t.Errorf("trainyard-manager has no flag -%s", name)
	}
	return def
}

// addrPort returns the port of a listen address such as ":8443".
func addrPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

// containerPort resolves a probe or Service target port against a container.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// TestManagerDeployment checks the manager's Deployment: restricted pod and
// container security contexts, resources, probes, ports and arguments.
func TestManagerDeployment(t *testing.T) {
	tr := base(t)
	dep := decodeInto[appsv1.Deployment](t, tr.find(t, "Deployment", managerName))
	spec := dep.Spec.Template.Spec

	checkAvailability(t, dep, decodeInto[policyv1.PodDisruptionBudget](t, tr.find(t, "PodDisruptionBudget", managerName)))
	if spec.ServiceAccountName != managerName {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, managerName)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the pod must not use the host's network, PID or IPC namespaces")
	}
	sel := dep.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 {
		t.Fatal("the Deployment needs spec.selector.matchLabels")
	}
	for k, v := range sel.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("selector label %s=%s is not on the pod template", k, v)
		}
	}

	// Pod security context.
	psc := spec.SecurityContext
	if psc == nil {
		t.Fatal("the pod has no securityContext")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot must be true")
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod securityContext.seccompProfile.type must be RuntimeDefault")
	}

	// Container security contexts.
	if len(spec.Containers) != 1 {
		t.Fatalf("want 1 container, got %d", len(spec.Containers))
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("container %s has no securityContext", c.Name)
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation must be false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem must be true", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s must not be privileged", c.Name)
		}
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			t.Errorf("container %s: runAsNonRoot must not be false", c.Name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("container %s must not run as root", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s: capabilities.drop must include ALL", c.Name)
		} else if len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s: capabilities.add must be empty, got %v", c.Name, sc.Capabilities.Add)
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s: seccompProfile.type must be RuntimeDefault", c.Name)
		}
	}

	c := spec.Containers[0]
	if img, _, _ := strings.Cut(c.Image, ":"); img != managerImage {
		t.Errorf("image %q; the overlays set %s, so the base must use that name", c.Image, managerImage)
	}

	// Resources.
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := req[r]; !ok || q.IsZero() {
			t.Errorf("container %s: no %s request", c.Name, r)
		}
	}
	if q, ok := lim[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Errorf("container %s: no memory limit", c.Name)
	} else if r := req[corev1.ResourceMemory]; r.Cmp(q) > 0 {
		t.Errorf("container %s: memory request %s exceeds limit %s", c.Name, r.String(), q.String())
	}
	if q, ok := lim[corev1.ResourceCPU]; ok && q.Cmp(resource.MustParse("100m")) < 0 {
		t.Errorf("container %s: CPU limit %s is too small to run the manager", c.Name, q.String())
	}

	// Arguments.
	for _, want := range []string{
		"--leader-elect",
		"--leader-election-namespace=$(POD_NAMESPACE)",
		"--metrics-bind-address=:8443",
		"--health-probe-bind-address=:8081",
		"--memory-limit=$(MEMORY_LIMIT)",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("container %s: args %q lack %q", c.Name, c.Args, want)
		}
	}
	args := containerArgs(c)
	if testing.Short() {
		t.Log("-short: not checking the args against the manager's flags")
	} else if flags, err := managerFlags(); err != nil {
		t.Errorf("reading the manager's flags: %v", err)
	} else {
		for name := range args {
			if _, ok := flags[name]; !ok {
				t.Errorf("container %s: trainyard-manager has no flag -%s", c.Name, name)
			}
		}
	}
	envOK := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	})
	if !envOK {
		t.Errorf("container %s: POD_NAMESPACE must come from the downward API (fieldRef metadata.namespace)", c.Name)
	}
	checkMemoryLimitEnv(t, c)

	// Ports and probes, consistent with the bind addresses.
	for _, name := range []string{"metrics-bind-address", "health-probe-bind-address"} {
		if args[name] == "" {
			t.Fatalf("container %s: no --%s=ADDRESS in args; cannot check its ports", c.Name, name)
		}
	}
	metricsPort := addrPort(t, args["metrics-bind-address"])
	probePort := addrPort(t, args["health-probe-bind-address"])
	if metricsPort != 8443 || probePort != 8081 {
		t.Errorf("metrics on %d and probes on %d, want 8443 and 8081", metricsPort, probePort)
	}
	// The metrics are for authorized scrapers only (HTTPS, bearer token
	// reviewed by the API server), which is the manager's default.
	if v := managerFlagValue(t, args, "metrics-secure"); v != "" && v != "true" {
		t.Errorf("container %s: --metrics-secure=%s; the base serves metrics to authorized scrapers only", c.Name, v)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == "metrics" && p.ContainerPort == metricsPort
	}) {
		t.Errorf("container %s: no port named metrics on %d", c.Name, metricsPort)
	}
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("container %s: no HTTP %s probe", c.Name, p.kind)
			continue
		}
		if got := p.probe.HTTPGet.Path; got != p.path {
			t.Errorf("container %s: %s probe path %q, want %q", c.Name, p.kind, got, p.path)
		}
		if got := containerPort(c, p.probe.HTTPGet.Port); got != probePort {
			t.Errorf("container %s: %s probe port %d, want %d", c.Name, p.kind, got, probePort)
		}
	}

	// The metrics Service selects the manager's pods and reaches the metrics port.
	svc := decodeInto[corev1.Service](t, tr.find(t, "Service", metricsService))
	checkService(t, svc, dep, 8443, metricsPort)
}

// checkAvailability checks what keeps the webhooks, which fail closed,
// answering while a manager pod goes away: two replicas, which need leader
// election (every replica serves the webhooks, one reconciles); a
// PodDisruptionBudget over exactly the manager's pods that lets a drain evict
// one of them at a time, and unready ones always; and a spread of the pods
// across nodes that never keeps one from scheduling (ScheduleAnyway: a
// single-node cluster runs both).
func checkAvailability(t *testing.T, dep *appsv1.Deployment, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas: %v, want 2", deref(dep.Spec.Replicas))
	}
	if c := dep.Spec.Template.Spec.Containers[0]; !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("container %s: args %q lack --leader-elect, which several replicas need", c.Name, c.Args)
	}
	podLabels := labels.Set(dep.Spec.Template.Labels)
	selects := func(what string, ls *metav1.LabelSelector) {
		t.Helper()
		sel, err := metav1.LabelSelectorAsSelector(ls)
		switch {
		case err != nil || ls == nil:
			t.Errorf("%s: label selector %v: %v", what, ls, err)
		case !sel.Matches(podLabels):
			t.Errorf("%s: selector %s does not select the manager's pods (labels %v)", what, sel, podLabels)
		case !slices.Equal(slices.Sorted(maps.Keys(ls.MatchLabels)), slices.Sorted(maps.Keys(dep.Spec.Selector.MatchLabels))) || len(ls.MatchExpressions) > 0:
			t.Errorf("%s: selector %s, want the Deployment's %v", what, sel, dep.Spec.Selector.MatchLabels)
		}
	}

	if pdb.Namespace != dep.Namespace {
		t.Errorf("PodDisruptionBudget in namespace %q, the Deployment in %q", pdb.Namespace, dep.Namespace)
	}
	selects("PodDisruptionBudget "+pdb.Name, pdb.Spec.Selector)
	// With 2 replicas, both maxUnavailable 1 and minAvailable 1 allow one
	// eviction at a time and none while one pod is down.
	one := intstr.FromInt32(1)
	ma, mu := pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable
	maxOne := ma == nil && mu != nil && *mu == one
	minOne := mu == nil && ma != nil && *ma == one
	if !maxOne && !minOne {
		t.Errorf("PodDisruptionBudget: minAvailable %v, maxUnavailable %v; want one of them 1", deref(ma), deref(mu))
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("PodDisruptionBudget: unhealthyPodEvictionPolicy %v, want AlwaysAllow (an unready replica must not block drains)", deref(p))
	}

	var spread []corev1.TopologySpreadConstraint
	for _, c := range dep.Spec.Template.Spec.TopologySpreadConstraints {
		if c.TopologyKey == corev1.LabelHostname {
			spread = append(spread, c)
		}
	}
	if len(spread) != 1 {
		t.Fatalf("topologySpreadConstraints %+v: want one over %s", dep.Spec.Template.Spec.TopologySpreadConstraints, corev1.LabelHostname)
	}
	if c := spread[0]; c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway {
		t.Errorf("topology spread over nodes: maxSkew %d, whenUnsatisfiable %s; want 1 and ScheduleAnyway", c.MaxSkew, c.WhenUnsatisfiable)
	}
	selects("topology spread over nodes", spread[0].LabelSelector)
}

// checkService checks that a Service selects the manager's pods and exposes
// port on the manager's container port target.
func checkService(t *testing.T, svc *corev1.Service, dep *appsv1.Deployment, port, target int32) {
	t.Helper()
	if len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s has no selector", svc.Name)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the manager's pods lack", svc.Name, k, v)
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		tp := p.TargetPort
		if tp.Type == intstr.Int && tp.IntVal == 0 {
			tp = intstr.FromInt32(p.Port)
		}
		return p.Port == port && containerPort(c, tp) == target &&
			(p.Protocol == "" || p.Protocol == corev1.ProtocolTCP)
	}) {
		t.Errorf("Service %s must expose port %d to the manager's container port %d", svc.Name, port, target)
	}
}

// TestManagerWebhookServer checks the Deployment's side of the webhooks: the
// container port of the webhook server, and the certificate directory. The
// manager never writes that directory, not even with its built-in
// certificate rotation: cert-controller only puts the certificate into the
// Secret and then waits for tls.crt to appear in the directory (rotator.go,
// ensureCertsMounted), and with cert-manager the Secret is filled by
// cert-manager. So the directory must be the Secret, mounted as a volume; the
// root file system stays read-only.
func TestManagerWebhookServer(t *testing.T) {
	tr := base(t)
	dep := decodeInto[appsv1.Deployment](t, tr.find(t, "Deployment", managerName))
	spec := dep.Spec.Template.Spec
	c := spec.Containers[0]
	args := containerArgs(c)

	if v := managerFlagValue(t, args, "enable-webhooks"); v != "" && v != "true" {
		t.Errorf("--enable-webhooks=%s: the base serves the webhooks its configurations point at", v)
	}
	if v := managerFlagValue(t, args, "cert-management"); v != "" && v != "internal" {
		t.Errorf("--cert-management=%s: the base relies on the built-in certificate rotation (internal)", v)
	}
	// The rotator keeps the Secret in the manager's namespace.
	if v, ok := args["namespace"]; ok && v != "$(POD_NAMESPACE)" {
		t.Errorf("--namespace=%s, want $(POD_NAMESPACE) or none (its default is $POD_NAMESPACE)", v)
	}
	for flag, want := range map[string]string{
		"webhook-port":         strconv.Itoa(webhookPort),
		"webhook-cert-dir":     webhookCertDir,
		"webhook-secret-name":  webhookSecret,
		"webhook-service-name": webhookService,
	} {
		if v := managerFlagValue(t, args, flag); v != "" && v != want {
			t.Errorf("the manager runs with --%s=%s; the manifests assume %s", flag, v, want)
		}
	}

	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == webhookPortName && p.ContainerPort == webhookPort && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP)
	}) {
		t.Errorf("container %s: no TCP port named %s on %d", c.Name, webhookPortName, webhookPort)
	}

	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) == webhookCertDir {
			mounts = append(mounts, m)
		}
	}
	if len(mounts) != 1 {
		t.Fatalf("container %s: want one volume mounted at %s (the root file system is read-only), found %d", c.Name, webhookCertDir, len(mounts))
	}
	if m := mounts[0]; m.SubPath != "" || m.SubPathExpr != "" {
		// The kubelet does not update subPath mounts when the Secret changes.
		t.Errorf("container %s: the certificate directory must mount the whole volume, not a subPath, so that rotated certificates show up", c.Name)
	}
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == mounts[0].Name })
	if i < 0 {
		t.Fatalf("container %s mounts volume %q, which the pod lacks", c.Name, mounts[0].Name)
	}
	vol := spec.Volumes[i]
	switch {
	case vol.Secret == nil:
		t.Errorf("volume %s at %s must be the Secret %s (the manager does not write the certificate files)", vol.Name, webhookCertDir, webhookSecret)
	case vol.Secret.SecretName != webhookSecret:
		t.Errorf("volume %s: Secret %q, want %q", vol.Name, vol.Secret.SecretName, webhookSecret)
	case len(vol.Secret.Items) > 0:
		t.Errorf("volume %s: items %v; the server needs tls.crt and tls.key under their own names", vol.Name, vol.Secret.Items)
	case vol.Secret.Optional != nil && *vol.Secret.Optional:
		t.Errorf("volume %s must not be optional: the pod has to wait for the Secret", vol.Name)
	}

	// The Secret exists in the base, empty, for the manager to fill in.
	d := tr.find(t, "Secret", webhookSecret)
	secret := decodeInto[corev1.Secret](t, d)
	if secret.Namespace != systemNamespace {
		t.Errorf("%s: namespace %q, want %q", d, secret.Namespace, systemNamespace)
	}
	// Opaque and without data, so that re-applying the manifests never
	// touches (or conflicts over) the keys the manager writes, and so that
	// no empty tls.crt shows up in the volume before the real one.
	if secret.Type != corev1.SecretTypeOpaque || len(secret.Data) > 0 || len(secret.StringData) > 0 {
		t.Errorf("%s: type %q with %d data keys; want an Opaque Secret without data", d, secret.Type, len(secret.Data)+len(secret.StringData))
	}
}

// checkMemoryLimitEnv: --memory-limit=$(MEMORY_LIMIT) gets the container's own
// memory limit from the downward API, so that the Go heap's soft limit follows
// whatever limit an overlay or values file sets.
func checkMemoryLimitEnv(t *testing.T, c corev1.Container) {
	t.Helper()
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" && e.ValueFrom.ResourceFieldRef.ContainerName == c.Name
	}) {
		t.Errorf("container %s: MEMORY_LIMIT must come from the downward API (resourceFieldRef limits.memory of the container itself)", c.Name)
	}
}
