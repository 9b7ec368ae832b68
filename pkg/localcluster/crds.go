package localcluster

import (
	"context"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (c *Cluster) caBundle() ([]byte, error) { return os.ReadFile(c.pki.caCert()) }

// renderCRDs reads JobSet's CRD (module zip), Kueue's CRDs (rendered with kustomize,
// whose patches add the conversion webhook, rewritten to a loopback URL; unless
// Options.NoKueue) and Trainyard's (unless Options.ExternalManager).
func (c *Cluster) renderCRDs() error {
	ca, err := c.caBundle()
	if err != nil {
		return err
	}
	jobset, err := readYAMLFiles(filepath.Join(c.jobsetDir, "config", "components", "crd", "bases"))
	if err != nil {
		return err
	}
	var kueue []*unstructured.Unstructured
	if !c.o.NoKueue {
		rendered, err := Kustomize(filepath.Join(c.kueueDir, "config", "components", "crd"))
		if err != nil {
			return err
		}
		kueueObjs, err := decodeYAML(rendered)
		if err != nil {
			return err
		}
		if kueue, err = localConversion(kueueObjs, webhookClientConfig{port: c.ports.KueueWebhook, caBundle: ca}); err != nil {
			return err
		}
	}
	var trainyard []*unstructured.Unstructured
	if !c.o.ExternalManager { // the chart or overlay under test brings them
		if trainyard, err = readYAMLFiles(filepath.Join(c.o.RepoDir, "manifests", "base", "crds")); err != nil {
			return err
		}
	}
	c.crds = nil
	for _, group := range [][]*unstructured.Unstructured{jobset, kueue, trainyard} {
		for _, o := range group {
			if o.GetKind() == "CustomResourceDefinition" {
				c.crds = append(c.crds, o)
			}
		}
	}
	return writeManifests(filepath.Join(c.o.StateDir, "manifests", "crds.yaml"), c.crds)
}

// installCRDs applies the CRDs and waits until all are Established.
func (c *Cluster) installCRDs(ctx context.Context) error {
	if err := c.Apply(ctx, c.crds...); err != nil {
		return err
	}
	return c.poll(ctx, "CRDs to be established", func() (bool, string, error) {
		for _, o := range c.crds {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.client.Get(ctx, client.ObjectKey{Name: o.GetName()}, &crd); err != nil {
				return false, "", err
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, crd.Name + " not established", nil
			}
		}
		return true, "", nil
	})
}
