package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// prepareWebhookConfigs renders the three projects' webhook configurations (Kueue's
// unless Options.NoKueue), pointed at their servers on 127.0.0.1 and renamed apart
// (controller-gen gives every project the same names).
func (c *Cluster) prepareWebhookConfigs() error {
	ca, err := c.caBundle()
	if err != nil {
		return err
	}
	type source struct {
		component, prefix string
		data              []byte
		port              int
	}
	jsRendered, err := Kustomize(filepath.Join(c.jobsetDir, "config", "components", "webhook"))
	if err != nil {
		return err
	}
	tyRaw, err := os.ReadFile(filepath.Join(c.o.RepoDir, "manifests", "base", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	sources := []source{{JobSet, "jobset-", jsRendered, c.ports.JobSetWebhook}, {Manager, "trainyard-", tyRaw, c.ports.ManagerWebhook}}
	if !c.o.NoKueue {
		kqRendered, err := Kustomize(filepath.Join(c.kueueDir, "config", "components", "webhook"))
		if err != nil {
			return err
		}
		sources = append(sources, source{Kueue, "kueue-", kqRendered, c.ports.KueueWebhook})
	}
	for _, x := range sources {
		objs, err := decodeYAML(x.data)
		if err != nil {
			return fmt.Errorf("%s webhooks: %w", x.component, err)
		}
		local, err := localWebhookConfigurations(objs, x.prefix, webhookClientConfig{port: x.port, caBundle: ca})
		if err != nil {
			return fmt.Errorf("%s webhooks: %w", x.component, err)
		}
		if x.component == Kueue {
			if err := onlyQueuedTrainJobs(local); err != nil {
				return fmt.Errorf("%s webhooks: %w", x.component, err)
			}
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
