package processnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A process node runs its pods as root on its host, so whatever credential
// the agent holds, a pod can take (docs/processnode.md): the agent should
// hold a node's, system:node:<name> in group system:nodes, which the API
// server's Node authorizer and NodeRestriction admission limit to what a
// kubelet may do for its own pods (read the Secrets and ConfigMaps they
// name, tokens of their service accounts, their status, its own Node). At
// start the agent asks the API server who it is (SelfSubjectReview) and
// whether it may do what no node may (SelfSubjectAccessReviews), and refuses
// to run with more than a node's credential unless
// Config.AllowPrivilegedCredentials says so.

// NodesGroup is the group of node identities.
const NodesGroup = "system:nodes"

// NodeUser is the user of node name's credential.
func NodeUser(name string) string { return "system:node:" + name }

// moreThanANode are requests the Node authorizer denies a node: an identity
// that may make one can do more than its pods should be able to take.
var moreThanANode = []authorizationv1.ResourceAttributes{
	{Verb: "*", Group: "*", Resource: "*"},
	{Verb: "list", Resource: "secrets"},
	{Verb: "get", Namespace: "kube-system", Resource: "secrets", Name: "trainyard-identity-probe"},
	{Verb: "create", Namespace: "kube-system", Resource: "serviceaccounts", Subresource: "token", Name: "default"},
	{Verb: "create", Namespace: "default", Resource: "pods", Subresource: "exec"},
	{Verb: "create", Namespace: "default", Group: "apps", Resource: "deployments"},
	{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
	{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
	{Verb: "impersonate", Resource: "users"},
	{Verb: "delete", Resource: "namespaces"},
}

// errPrivileged is a credential that is more than the node's.
var errPrivileged = errors.New("more than a node's credential")

// checkIdentity returns nil when the agent's credential is node name's and
// may do nothing of moreThanANode, else an error wrapping errPrivileged that
// says why (or another error when the API server could not answer).
func checkIdentity(ctx context.Context, client kubernetes.Interface, name string) error {
	who, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("asking the API server who the agent's credential is (SelfSubjectReview): %w", err)
	}
	user := who.Status.UserInfo
	var why []string
	if user.Username != NodeUser(name) || !slices.Contains(user.Groups, NodesGroup) {
		why = append(why, fmt.Sprintf("it is %q in groups %v, not %q in group %s", user.Username, user.Groups, NodeUser(name), NodesGroup))
	}
	for _, ra := range moreThanANode {
		ra := ra
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("asking the API server what the agent's credential may do (SelfSubjectAccessReview): %w", err)
		}
		if r.Status.Allowed {
			why = append(why, "it may "+describe(ra))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", errPrivileged, strings.Join(why, "; "))
}

// describe says what ra asks, as kubectl auth can-i would.
func describe(ra authorizationv1.ResourceAttributes) string {
	res := ra.Resource
	if ra.Subresource != "" {
		res += "/" + ra.Subresource
	}
	if ra.Group != "" {
		res += "." + ra.Group
	}
	where := " in every namespace"
	if ra.Namespace != "" {
		where = " in namespace " + ra.Namespace
	}
	if ra.Name != "" {
		res += " " + ra.Name
	}
	return ra.Verb + " " + res + where
}
