package processnode

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a process node reads beyond a kubelet's rights: the pods of the other
// process nodes and the headless Services' EndpointSlices, for its pods'
// hosts files (cluster DNS names, agent.go). The Node authorizer lets a node
// list only its own pods and no EndpointSlices, so the process nodes' users
// get ClusterRoleName too (ClusterRoleBinding), and nothing more: the
// agent's start check (checkIdentity) asks for none of these.

// ClusterRoleName is the ClusterRole of what a process node reads beyond a node.
const ClusterRoleName = "trainyard:process-node"

// ClusterRole is ClusterRoleName: list and watch pods and EndpointSlices.
func ClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
}

// ClusterRoleBinding binds ClusterRoleName to the users of nodes.
func ClusterRoleBinding(nodes ...string) *rbacv1.ClusterRoleBinding {
	b := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ClusterRoleName},
	}
	for _, n := range nodes {
		b.Subjects = append(b.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: NodeUser(n)})
	}
	return b
}
