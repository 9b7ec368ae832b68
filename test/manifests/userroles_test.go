package manifests

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Verbs of the user roles.
var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

// Labels that aggregate a ClusterRole into Kubernetes' built-in user-facing
// roles and into Kubeflow's.
const (
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	kubeflowView     = "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-view"
	kubeflowEdit     = "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-edit"
	kubeflowAdmin    = "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-admin"
)

// TestUserRoles checks the ClusterRoles for the users of the cluster: exactly
// their permissions, and the labels that aggregate them (and only them) into
// the built-in view, edit and admin roles (and Kubeflow's).
func TestUserRoles(t *testing.T) {
	tr := base(t)
	for _, tc := range []struct {
		role       string
		want       []string
		wantLabels map[string]string
	}{{
		role: viewRole,
		want: sorted(
			permissions("trainer.kubeflow.org", []string{"trainjobs", "trainjobs/status", "optimizationjobs", "optimizationjobs/status", "trainingruntimes", "clustertrainingruntimes"}, readVerbs...),
			permissions("kubeflow.org", []string{"pytorchjobs", "pytorchjobs/status", "mpijobs", "mpijobs/status", "xgboostjobs", "xgboostjobs/status"}, readVerbs...),
		),
		wantLabels: map[string]string{aggregateToView: "true", kubeflowView: "true"},
	}, {
		// Namespaced kinds: read and write. ClusterTrainingRuntimes, shared by
		// every namespace, and status, which the manager writes: read only.
		role: editRole,
		want: sorted(
			permissions("trainer.kubeflow.org", []string{"trainjobs", "optimizationjobs", "trainingruntimes"}, writeVerbs...),
			permissions("trainer.kubeflow.org", []string{"trainjobs/status", "optimizationjobs/status", "clustertrainingruntimes"}, readVerbs...),
			permissions("kubeflow.org", []string{"pytorchjobs", "mpijobs", "xgboostjobs"}, writeVerbs...),
			permissions("kubeflow.org", []string{"pytorchjobs/status", "mpijobs/status", "xgboostjobs/status"}, readVerbs...),
		),
		wantLabels: map[string]string{aggregateToEdit: "true", aggregateToAdmin: "true", kubeflowEdit: "true", kubeflowAdmin: "true"},
	}, {
		role:       runtimeReaderRole,
		want:       permissions("trainer.kubeflow.org", []string{"clustertrainingruntimes"}, readVerbs...),
		wantLabels: map[string]string{},
	}, {
		role:       metricsReaderRole,
		want:       []string{"/metrics: get"},
		wantLabels: map[string]string{},
	}} {
		t.Run(tc.role, func(t *testing.T) {
			d := tr.find(t, "ClusterRole", tc.role)
			cr := decodeInto[rbacv1.ClusterRole](t, d)
			if diff := cmp.Diff(tc.want, rules(cr.Rules)); diff != "" {
				t.Errorf("%s permissions (-want +got):\n%s", d, diff)
			}
			got := map[string]string{}
			for k, v := range cr.Labels {
				if strings.HasPrefix(k, "rbac.authorization.") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.wantLabels, got); diff != "" {
				t.Errorf("%s aggregation labels (-want +got):\n%s", d, diff)
			}
		})
	}
}

// TestUserRolesCoverEveryKind checks the user roles against the CRDs that
// manifests/base installs, so that a new kind (or subresource) cannot ship
// without them: view reads every kind and status; edit writes every
// namespaced kind and reads, never writes, cluster-scoped kinds and status.
func TestUserRolesCoverEveryKind(t *testing.T) {
	tr := base(t)
	var wantView, wantEdit []string
	for _, d := range tr.docs {
		if d.kind() != "CustomResourceDefinition" {
			continue
		}
		crd := decodeInto[apiextensionsv1.CustomResourceDefinition](t, d)
		g, plural := crd.Spec.Group, crd.Spec.Names.Plural
		wantView = append(wantView, permissions(g, []string{plural}, readVerbs...)...)
		if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
			wantEdit = append(wantEdit, permissions(g, []string{plural}, writeVerbs...)...)
		} else {
			wantEdit = append(wantEdit, permissions(g, []string{plural}, readVerbs...)...)
		}
		if slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Subresources != nil && v.Subresources.Status != nil
		}) {
			wantView = append(wantView, permissions(g, []string{plural + "/status"}, readVerbs...)...)
			wantEdit = append(wantEdit, permissions(g, []string{plural + "/status"}, readVerbs...)...)
		}
	}
	for role, want := range map[string][]string{viewRole: sorted(wantView), editRole: sorted(wantEdit)} {
		cr := decodeInto[rbacv1.ClusterRole](t, tr.find(t, "ClusterRole", role))
		if diff := cmp.Diff(want, rules(cr.Rules)); diff != "" {
			t.Errorf("ClusterRole %s against the CRDs of manifests/base (-want +got):\n%s", role, diff)
		}
	}
}

// canI asks the API server, as user (impersonated by the admin), whether it
// may do verb on resource in namespace ns; ns "" asks cluster-wide, which is
// how requests for cluster-scoped objects are authorized (kubectl would
// otherwise send its default namespace, where a RoleBinding could answer yes
// for a cluster-scoped resource that no real request would get).
func (s *apiServer) canI(t *testing.T, user, verb, resource, ns string) (bool, error) {
	t.Helper()
	args := []string{"auth", "can-i", verb, resource, "--as=" + user}
	switch {
	case strings.HasPrefix(resource, "/"): // a non-resource URL
	case ns == "":
		args = append(args, "--all-namespaces")
	default:
		args = append(args, "--namespace="+ns)
	}
	if r, sub, ok := strings.Cut(resource, "/"); ok && r != "" {
		args[3] = r
		args = append(args, "--subresource="+sub)
	}
	out, err := s.run(t, nil, "", args...)
	switch strings.TrimSpace(out) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, fmt.Errorf("kubectl %s: %q: %w", strings.Join(args, " "), out, err)
}

// TestUserRolesAgainstAPIServer applies the user roles of manifests/base to a
// real kube-apiserver, whose kube-controller-manager aggregates them into the
// built-in roles, binds the built-in `edit`, `view` and `admin` ClusterRoles
// to users in one namespace (RoleBindings, as a platform gives its teams
// namespaces), and checks what each user may do: the API server's own answer
// (SubjectAccessReview through `kubectl auth can-i`) and, for the decisive
// cases, real requests.
func TestUserRolesAgainstAPIServer(t *testing.T) {
	s := startAPIServer(t)
	const team, other = "team-a", "team-b"
	for _, ns := range []string{team, other} {
		s.mustRun(t, nil, "create", "namespace", ns)
	}
	// The user RBAC as kustomize renders it.
	var stream bytes.Buffer
	n := 0
	for _, d := range render(t, "manifests/base") {
		if (d.kind() == "ClusterRole" || d.kind() == "ClusterRoleBinding") &&
			slices.Contains([]string{viewRole, editRole, runtimeReaderRole, metricsReaderRole}, d.name()) {
			stream.WriteString("---\n")
			stream.Write(d.json)
			stream.WriteString("\n")
			n++
		}
	}
	if n != 5 {
		t.Fatalf("found %d of the 4 user ClusterRoles and the runtime reader's binding in manifests/base", n)
	}
	s.mustRun(t, stream.Bytes(), "apply", "--server-side", "-f", "-")
	for user, role := range map[string]string{"alice": "edit", "bob": "view", "carol": "admin"} {
		s.mustRun(t, nil, "create", "rolebinding", user+"-"+role, "--clusterrole="+role, "--user="+user, "--namespace="+team)
	}

	type check struct{ user, verb, resource, ns string }
	want := map[check]bool{
		// edit: runs jobs in its namespace, nowhere else; reads the
		// cluster's runtimes, cannot change them; never writes status.
		{"alice", "create", "trainjobs.trainer.kubeflow.org", team}:             true,
		{"alice", "delete", "trainjobs.trainer.kubeflow.org", team}:             true,
		{"alice", "patch", "trainjobs.trainer.kubeflow.org", team}:              true,
		{"alice", "update", "trainjobs.trainer.kubeflow.org/status", team}:      false,
		{"alice", "get", "trainjobs.trainer.kubeflow.org/status", team}:         true,
		{"alice", "create", "trainingruntimes.trainer.kubeflow.org", team}:      true,
		{"alice", "create", "pytorchjobs.kubeflow.org", team}:                   true,
		{"alice", "create", "trainjobs.trainer.kubeflow.org", other}:            false,
		{"alice", "list", "clustertrainingruntimes.trainer.kubeflow.org", ""}:   true,
		{"alice", "get", "clustertrainingruntimes.trainer.kubeflow.org", ""}:    true,
		{"alice", "create", "clustertrainingruntimes.trainer.kubeflow.org", ""}: false,
		{"alice", "update", "clustertrainingruntimes.trainer.kubeflow.org", ""}: false,
		{"alice", "delete", "clustertrainingruntimes.trainer.kubeflow.org", ""}: false,
		{"alice", "get", "/metrics", ""}:                                        false,
		// view: reads, never writes.
		{"bob", "list", "trainjobs.trainer.kubeflow.org", team}:               true,
		{"bob", "watch", "trainjobs.trainer.kubeflow.org", team}:              true,
		{"bob", "get", "trainjobs.trainer.kubeflow.org/status", team}:         true,
		{"bob", "list", "trainingruntimes.trainer.kubeflow.org", team}:        true,
		{"bob", "list", "pytorchjobs.kubeflow.org", team}:                     true,
		{"bob", "create", "trainjobs.trainer.kubeflow.org", team}:             false,
		{"bob", "delete", "trainjobs.trainer.kubeflow.org", team}:             false,
		{"bob", "create", "pytorchjobs.kubeflow.org", team}:                   false,
		{"bob", "list", "clustertrainingruntimes.trainer.kubeflow.org", ""}:   true,
		{"bob", "create", "clustertrainingruntimes.trainer.kubeflow.org", ""}: false,
		// admin: what edit may, still not the cluster's runtimes.
		{"carol", "create", "trainjobs.trainer.kubeflow.org", team}:             true,
		{"carol", "create", "pytorchjobs.kubeflow.org", team}:                   true,
		{"carol", "create", "clustertrainingruntimes.trainer.kubeflow.org", ""}: false,
		// Any authenticated user sees the runtime catalog, nothing else.
		{"dave", "list", "clustertrainingruntimes.trainer.kubeflow.org", ""}: true,
		{"dave", "list", "trainjobs.trainer.kubeflow.org", team}:             false,
	}
	// The aggregation controller fills the built-in roles asynchronously.
	var diff string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		got := map[check]bool{}
		for c := range want {
			var err error
			if got[c], err = s.canI(t, c.user, c.verb, c.resource, c.ns); err != nil {
				t.Fatal(err)
			}
		}
		if diff = cmp.Diff(want, got); diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("permissions of the users bound to edit (alice), view (bob), admin (carol) and of nobody (dave) in %s (-want +got):\n%s", team, diff)
		}
	}

	// Real requests, impersonated.
	job := []byte(`{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
 "metadata": {"name": "mnist"}, "spec": {"runtimeRef": {"name": "torch-distributed"}}}`)
	runtime := []byte(`{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
 "metadata": {"name": "mine"},
 "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
  "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
   "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "busybox:1.36"}]}}}}}]}}}}`)
	s.mustRun(t, job, "create", "-f", "-", "--namespace="+team, "--as=alice")
	s.mustRun(t, nil, "get", "trainjobs", "--namespace="+team, "--as=bob")
	s.mustRun(t, nil, "get", "clustertrainingruntimes", "--as=alice")
	for _, c := range []struct {
		user  string
		stdin []byte
		args  []string
	}{
		{"bob", job, []string{"create", "-f", "-", "--namespace=" + team}},
		{"bob", nil, []string{"delete", "trainjob", "mnist", "--namespace=" + team}},
		{"alice", runtime, []string{"create", "-f", "-"}},
		{"carol", runtime, []string{"create", "-f", "-"}},
		{"dave", nil, []string{"get", "trainjobs", "--namespace=" + team}},
	} {
		_, err := s.run(t, c.stdin, "", append(c.args, "--as="+c.user)...)
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("kubectl %s as %s: error %v, want Forbidden", strings.Join(c.args, " "), c.user, err)
		}
	}
	s.mustRun(t, nil, "delete", "trainjob", "mnist", "--namespace="+team, "--as=alice")
}
