package manifests

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	legacy "github.com/trainyard/trainyard/pkg/controller/pytorchjob"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/test/prereq"
)

// rules flattens RBAC rules into sorted permissions: "group/resource: verb",
// or "group/resource: verb (name)" for each name of a rule limited by
// resourceNames, and "url: verb" for non-resource URLs.
func rules(rs []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rs {
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, fmt.Sprintf("%s: %s", u, v))
			}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if len(r.ResourceNames) == 0 {
						out = append(out, fmt.Sprintf("%s/%s: %s", g, res, v))
					}
					for _, name := range r.ResourceNames {
						out = append(out, fmt.Sprintf("%s/%s: %s (%s)", g, res, v, name))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// permissions returns the permissions of verbs on all objects of resources.
func permissions(group string, resources []string, verbs ...string) []string {
	var out []string
	for _, r := range resources {
		for _, v := range verbs {
			out = append(out, fmt.Sprintf("%s/%s: %s", group, r, v))
		}
	}
	return out
}

// named returns the permissions of verbs on the one object called name.
func named(group, resource, name string, verbs ...string) []string {
	var out []string
	for _, v := range verbs {
		out = append(out, fmt.Sprintf("%s/%s: %s (%s)", group, resource, v, name))
	}
	return out
}

func sorted(parts ...[]string) []string {
	out := slices.Concat(parts...)
	sort.Strings(out)
	return out
}

// policyRules returns the rules of a Role or ClusterRole document.
func policyRules(t *testing.T, d doc) []rbacv1.PolicyRule {
	t.Helper()
	if d.kind() == "ClusterRole" {
		return decodeInto[rbacv1.ClusterRole](t, d).Rules
	}
	return decodeInto[rbacv1.Role](t, d).Rules
}

// TestRBACNoWildcards checks that no Role or ClusterRole grants "*" (or any
// pattern) in apiGroups, resources, verbs, resourceNames or nonResourceURLs,
// and that none aggregates other roles.
func TestRBACNoWildcards(t *testing.T) {
	tr := base(t)
	n := 0
	for _, d := range tr.docs {
		var rs []rbacv1.PolicyRule
		switch d.kind() {
		case "Role":
			rs = decodeInto[rbacv1.Role](t, d).Rules
		case "ClusterRole":
			cr := decodeInto[rbacv1.ClusterRole](t, d)
			if cr.AggregationRule != nil {
				t.Errorf("%s: aggregationRule grants whatever other roles hold", d)
			}
			rs = cr.Rules
		default:
			continue
		}
		n++
		if len(rs) == 0 {
			t.Errorf("%s: no rules", d)
		}
		for i, r := range rs {
			for field, vals := range map[string][]string{
				"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs,
				"resourceNames": r.ResourceNames, "nonResourceURLs": r.NonResourceURLs,
			} {
				for _, v := range vals {
					if strings.Contains(v, "*") {
						t.Errorf("%s: rule %d: wildcard %q in %s", d, i, v, field)
					}
				}
			}
			switch {
			case len(r.NonResourceURLs) > 0:
				// Non-resource URLs (/metrics) exist only cluster-wide, and a
				// rule names either them or resources.
				if d.kind() != "ClusterRole" || len(r.APIGroups)+len(r.Resources)+len(r.ResourceNames) > 0 || len(r.Verbs) == 0 {
					t.Errorf("%s: rule %d must name only nonResourceURLs and verbs, in a ClusterRole: %+v", d, i, r)
				}
			case len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0:
				t.Errorf("%s: rule %d must name apiGroups, resources and verbs: %+v", d, i, r)
			}
			// resourceNames cannot limit these verbs: a create has no name yet,
			// and informers list and watch without a field selector, so such a
			// rule would grant less than it seems to (or, for an informer,
			// nothing at all).
			if len(r.ResourceNames) > 0 {
				for _, v := range r.Verbs {
					if slices.Contains([]string{"create", "list", "watch", "deletecollection"}, v) {
						t.Errorf("%s: rule %d limits %q with resourceNames, which does not work for that verb", d, i, v)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no Role or ClusterRole found")
	}
}

// TestSecretAccess checks that no ClusterRole but the manager's reaches
// Secrets, and that a Role does so only to list and watch (which an informer
// needs and resourceNames cannot limit) or on Secrets it names. The manager
// writes Secrets that are children of TrainJobs (an MPI job's SSH key, a Flux
// job's CURVE certificate), in the TrainJobs' namespaces, whose names it cannot
// know in advance, as Kubeflow Trainer's manager does; it caches only its own
// (by label), and TestManagerClusterRole pins exactly what it gets.
func TestSecretAccess(t *testing.T) {
	for _, d := range base(t).docs {
		if d.kind() != "Role" && d.kind() != "ClusterRole" {
			continue
		}
		for i, r := range policyRules(t, d) {
			if !slices.Contains(r.APIGroups, "") || !slices.ContainsFunc(r.Resources, func(res string) bool {
				return res == "secrets" || strings.HasPrefix(res, "secrets/")
			}) {
				continue
			}
			if d.kind() == "ClusterRole" {
				if d.name() != managerName {
					t.Errorf("%s: rule %d grants %v on Secrets in every namespace", d, i, r.Verbs)
				}
				continue
			}
			for _, v := range r.Verbs {
				if v != "list" && v != "watch" && len(r.ResourceNames) == 0 {
					t.Errorf("%s: rule %d grants %s on every Secret of the namespace; limit it with resourceNames", d, i, v)
				}
			}
		}
	}
}

// TestManagerClusterRole checks that the manager's ClusterRole grants exactly
// what the controller needs: no more, no less.
func TestManagerClusterRole(t *testing.T) {
	cr := decodeInto[rbacv1.ClusterRole](t, base(t).find(t, "ClusterRole", managerName))
	want := sorted(
		// delete: finished TrainJobs are deleted once past ttlSecondsAfterFinished.
		// OptimizationJobs create their trials (TrainJobs).
		permissions("trainer.kubeflow.org", []string{"trainjobs"}, "get", "list", "watch", "create", "update", "patch", "delete"),
		permissions("trainer.kubeflow.org", []string{"trainjobs/status"}, "get", "update", "patch"),
		permissions("trainer.kubeflow.org", []string{"optimizationjobs"}, "get", "list", "watch", "update", "patch"),
		permissions("trainer.kubeflow.org", []string{"optimizationjobs/status"}, "get", "update", "patch"),
		permissions("trainer.kubeflow.org", []string{"optimizationjobs/finalizers"}, "update"),
		// Setting blockOwnerDeletion on the JobSet needs this where OwnerReferencesPermissionEnforcement is on.
		permissions("trainer.kubeflow.org", []string{"trainjobs/finalizers"}, "update"),
		permissions("trainer.kubeflow.org", []string{"trainingruntimes", "clustertrainingruntimes"}, "get", "list", "watch"),
		permissions("jobset.x-k8s.io", []string{"jobsets"}, "get", "list", "watch", "create", "update", "patch", "delete"),
		// Events through core/v1, where they carry firstTimestamp and count
		// (pkg/eventrecorder); the broadcaster creates and patches, never updates.
		permissions("", []string{"events"}, "create", "patch"),
		// Status (node counts, start and completion times) comes from the
		// JobSets' pods, which the manager only reads through its cache.
		// Pods: read for status; patch to label them job-name=<PyTorchJob> (the
		// Job API reserves that label in templates); delete for cleanPodPolicy.
		permissions("", []string{"pods"}, "get", "list", "watch", "patch", "delete"),
		// Headless Services that make PyTorchJob v1's MASTER_ADDR resolve:
		// children of the plan like the JobSet, so watched (get, list, watch;
		// only Trainyard's own, by label) and created once.
		permissions("", []string{"services"}, "get", "list", "watch", "create", "delete"),
		// Runtime plugins' children (the Flux entrypoint ConfigMap, MPI's
		// hostfile): created once or server-side applied, watched; the cache
		// holds only Trainyard's own, by label. Never updated in place; the
		// garbage collector deletes them with their TrainJob. Delete is for
		// the status server's CA ConfigMap only, one per namespace with
		// TrainJobs (statusserver.CAPublisher), which no job owns: it goes
		// with the namespace's last TrainJob; by name (issue #40: no other
		// ConfigMap of any namespace).
		permissions("", []string{"configmaps"}, "get", "list", "watch", "create", "patch"),
		named("", "configmaps", "trainyard-status-server-ca", "delete"),
		// Their Secrets (Flux's CURVE key pair, MPI's SSH key) are only ever
		// created, once: no patch.
		permissions("", []string{"secrets"}, "get", "list", "watch", "create"),
		permissions("kubeflow.org", []string{"pytorchjobs", "mpijobs", "xgboostjobs"}, "get", "list", "watch", "update", "patch", "delete"),
		permissions("kubeflow.org", []string{"pytorchjobs/status", "mpijobs/status", "xgboostjobs/status"}, "get", "update", "patch"),
		permissions("kubeflow.org", []string{"pytorchjobs/finalizers", "mpijobs/finalizers", "xgboostjobs/finalizers"}, "update"),
		// Kueue Workloads, read to explain why a queued TrainJob waits.
		permissions("kueue.x-k8s.io", []string{"workloads"}, "get", "list", "watch"),
		// Gang PodGroups (coscheduling, Volcano): created, applied while the
		// job is suspended, watched; the garbage collector deletes them.
		permissions("scheduling.x-k8s.io", []string{"podgroups"}, "get", "list", "watch", "create", "patch"),
		permissions("scheduling.volcano.sh", []string{"podgroups"}, "get", "list", "watch", "create", "patch"),
		// A Volcano runtime's PriorityClass, looked up by the TrainJob webhook.
		permissions("scheduling.k8s.io", []string{"priorityclasses"}, "get", "list", "watch"),
		// The metrics endpoint (pkg/metrics/serving) has the API server
		// authenticate each scraper's bearer token and authorize it for GET
		// /metrics; these reviews create nothing and reveal only the verdict.
		permissions("authentication.k8s.io", []string{"tokenreviews"}, "create"),
		permissions("authorization.k8s.io", []string{"subjectaccessreviews"}, "create"),
	)
	if diff := cmp.Diff(want, rules(cr.Rules)); diff != "" {
		t.Errorf("ClusterRole %s permissions (-want +got):\n%s", managerName, diff)
	}
}

// TestManagerRBACCoversOwnedKinds checks that RBAC follows from the plugin
// lists: every child kind a plugin declares (framework.OwnerPlugin) can be
// watched and created by the manager, so a new plugin that forgets its
// +kubebuilder:rbac marker fails here, not in a cluster.
func TestManagerRBACCoversOwnedKinds(t *testing.T) {
	cr := decodeInto[rbacv1.ClusterRole](t, base(t).find(t, "ClusterRole", managerName))
	granted := map[string]map[string]bool{}
	for _, r := range cr.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := g + "/" + res
				if granted[key] == nil {
					granted[key] = map[string]bool{}
				}
				for _, v := range r.Verbs {
					granted[key][v] = true
				}
			}
		}
	}
	scheme := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	owned := append(plugins.Owned(), legacy.Owned()...)
	if len(owned) == 0 {
		t.Fatal("no plugin declares a child kind")
	}
	for _, o := range owned {
		gvks, _, err := scheme.ObjectKinds(o)
		if err != nil {
			t.Fatalf("kind of %T: %v", o, err)
		}
		plural, _ := apimeta.UnsafeGuessKindToResource(gvks[0])
		key := plural.Group + "/" + plural.Resource
		for _, v := range []string{"get", "list", "watch", "create"} {
			if !granted[key][v] {
				t.Errorf("the manager's ClusterRole does not grant %s on %s, which a plugin emits (%T)", v, key, o)
			}
		}
	}
}

// TestLeaderElectionRole checks that leader election is granted by a
// namespaced Role with exactly the Lease and Event permissions it uses.
func TestLeaderElectionRole(t *testing.T) {
	d := base(t).find(t, "Role", leaderElectionRole)
	role := decodeInto[rbacv1.Role](t, d)
	if ns := role.Namespace; ns != systemNamespace {
		t.Errorf("%s: namespace %q, want %q", d, ns, systemNamespace)
	}
	want := sorted(
		permissions("coordination.k8s.io", []string{"leases"}, "get", "list", "watch", "create", "update", "patch", "delete"),
		permissions("events.k8s.io", []string{"events"}, "create", "patch"),
		// controller-runtime's leader-election recorder writes core/v1 Events.
		permissions("", []string{"events"}, "create", "patch"),
	)
	if diff := cmp.Diff(want, rules(role.Rules)); diff != "" {
		t.Errorf("Role %s permissions (-want +got):\n%s", leaderElectionRole, diff)
	}
}

// TestCertRotationRBAC checks that the manager's webhook certificate rotation
// (github.com/open-policy-agent/cert-controller v0.16.0, pkg/rotator, used with
// --cert-management=internal) gets exactly what it uses:
//   - Secrets, in the manager's namespace: list and watch, for the informer of
//     the rotator's namespaced cache that every read goes through (the
//     reconciler watches Secrets with source.Kind on that cache;
//     refreshCertIfNeeded and Reconcile read the Secret from it); update, of
//     the certificate Secret only, as writeSecret writes it with
//     client.Update. It never creates the Secret: refreshCertIfNeeded fails
//     if it is missing, so it is part of the base.
//   - Mutating and validating webhook configurations: list and watch,
//     cluster-wide, for the informers of that cache (they are cluster-scoped,
//     and the reconciler watches them and reads them from the cache in
//     ensureCerts); update, of Trainyard's two configurations only, as
//     ensureCerts writes the caBundle with client.Update.
//
// No get and no patch: nothing reads past the cache or patches.
func TestCertRotationRBAC(t *testing.T) {
	tr := base(t)
	d := tr.find(t, "Role", certRotationRole)
	role := decodeInto[rbacv1.Role](t, d)
	if role.Namespace != systemNamespace {
		t.Errorf("%s: namespace %q, want %q", d, role.Namespace, systemNamespace)
	}
	want := sorted(
		permissions("", []string{"secrets"}, "list", "watch"),
		named("", "secrets", webhookSecret, "update"),
	)
	if diff := cmp.Diff(want, rules(role.Rules)); diff != "" {
		t.Errorf("Role %s permissions (-want +got):\n%s", certRotationRole, diff)
	}

	mutating, validating := managerWebhookConfigurations(t)
	cr := decodeInto[rbacv1.ClusterRole](t, tr.find(t, "ClusterRole", certRotationRole))
	want = sorted(
		permissions("admissionregistration.k8s.io", []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, "list", "watch"),
		named("admissionregistration.k8s.io", "mutatingwebhookconfigurations", mutating, "update"),
		named("admissionregistration.k8s.io", "validatingwebhookconfigurations", validating, "update"),
	)
	if diff := cmp.Diff(want, rules(cr.Rules)); diff != "" {
		t.Errorf("ClusterRole %s permissions (-want +got):\n%s", certRotationRole, diff)
	}

	// The Secret the Role names is the one the manager uses and the
	// Deployment mounts.
	if name := managerFlagValue(t, nil, "webhook-secret-name"); name != "" && name != webhookSecret {
		t.Errorf("the manager keeps its certificate in Secret %q, but the Role grants update on %q", name, webhookSecret)
	}
}

// TestRoleBindings checks that each of the manager's roles is bound to the
// manager's ServiceAccount, and to nothing else, that the ClusterTrainingRuntime
// reader and the public ConfigMap's reader are bound to every authenticated
// user, and that there are no other
// bindings, nor unbound roles but the user roles (aggregatedRoles) and the
// metrics reader, which the cluster admin binds to a scraper.
func TestRoleBindings(t *testing.T) {
	tr := base(t)
	tr.find(t, "ServiceAccount", managerName)
	manager := []rbacv1.Subject{{Kind: "ServiceAccount", Name: managerName, Namespace: systemNamespace}}

	type binding struct {
		kind, name, roleKind, role string
		subjects                   []rbacv1.Subject
	}
	bindings := []binding{
		{"ClusterRoleBinding", managerName, "ClusterRole", managerName, manager},
		{"RoleBinding", leaderElectionRole, "Role", leaderElectionRole, manager},
		{"RoleBinding", certRotationRole, "Role", certRotationRole, manager},
		{"ClusterRoleBinding", certRotationRole, "ClusterRole", certRotationRole, manager},
		{"ClusterRoleBinding", runtimeReaderRole, "ClusterRole", runtimeReaderRole, allAuthenticated},
		{"RoleBinding", publicConfigMapReaderRole, "Role", publicConfigMapReaderRole, allAuthenticated},
	}
	bound := map[string]bool{}
	for _, b := range bindings {
		d := tr.find(t, b.kind, b.name)
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		if b.kind == "RoleBinding" {
			rb := decodeInto[rbacv1.RoleBinding](t, d)
			ref, subjects = rb.RoleRef, rb.Subjects
			if rb.Namespace != systemNamespace {
				t.Errorf("%s: namespace %q, want %q", d, rb.Namespace, systemNamespace)
			}
		} else {
			crb := decodeInto[rbacv1.ClusterRoleBinding](t, d)
			ref, subjects = crb.RoleRef, crb.Subjects
		}
		if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: b.roleKind, Name: b.role}, ref); diff != "" {
			t.Errorf("%s roleRef (-want +got):\n%s", d, diff)
		}
		if diff := cmp.Diff(b.subjects, subjects); diff != "" {
			t.Errorf("%s subjects (-want +got):\n%s", d, diff)
		}
		bound[b.roleKind+"/"+b.role] = true
	}

	for _, d := range tr.docs {
		switch d.kind() {
		case "RoleBinding", "ClusterRoleBinding":
			if !slices.ContainsFunc(bindings, func(b binding) bool { return b.kind == d.kind() && b.name == d.name() }) {
				t.Errorf("%s: unexpected binding; add it to this test", d)
			}
		case "Role", "ClusterRole":
			unboundByDesign := d.kind() == "ClusterRole" && (slices.Contains(aggregatedRoles, d.name()) || d.name() == metricsReaderRole)
			if !bound[d.kind()+"/"+d.name()] && !unboundByDesign {
				t.Errorf("%s is bound to nobody", d)
			}
		}
	}
}

// TestGeneratedRBACUpToDate regenerates the ClusterRole with controller-gen
// and compares it with manifests/base/rbac/role.yaml.
func TestGeneratedRBACUpToDate(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join(repoRoot, "bin", "controller-gen"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(bin)
	prereq.Requiref(t, !errors.Is(err, fs.ErrNotExist), "controller-gen not found at %s; install the pinned controller-gen (v0.20.1) there (`make generate` builds it) to check that manifests/base/rbac/role.yaml is up to date", bin)
	out := t.TempDir()
	cmd := exec.Command(bin, "rbac:roleName="+managerName, "paths=./pkg/...", "output:rbac:artifacts:config="+out)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	generated, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "base", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(generated), string(committed)); diff != "" {
		t.Errorf("manifests/base/rbac/role.yaml is out of date with the +kubebuilder:rbac markers; regenerate it with\n  %s\n(-generated +committed):\n%s", regenerateRBAC, diff)
	}
}
