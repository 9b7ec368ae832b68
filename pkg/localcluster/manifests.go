package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// moduleDir returns the directory, in the module cache, of module mod (e.g.
// sigs.k8s.io/kueue) at the version the binary bin was built with (its build
// information: the main module or a dependency), downloading it if needed. The
// CRDs, webhooks and kwok stages the cluster installs come from there, so that
// they always match the binaries that run, and nothing is read from where the
// binaries were built (test/tools).
func moduleDir(ctx context.Context, bin, mod string) (string, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("reading the build information of %s: %w", bin, err)
	}
	path, version, dir := moduleVersion(bi, mod)
	switch {
	case dir != "":
		return dir, nil
	case version == "":
		return "", fmt.Errorf("%s was not built from a released %s", bin, mod)
	}
	return downloadModule(ctx, path, version)
}

// moduleVersion finds module mod in a binary's build information (its main
// module or a dependency): the module and version it was built from (a
// replacement's, when replaced), or the directory a replacement names.
// version is empty when the binary has no released mod.
func moduleVersion(bi *debug.BuildInfo, mod string) (path, version, dir string) {
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m == nil || m.Path != mod {
			continue
		}
		path, version = m.Path, m.Version
		if r := m.Replace; r != nil {
			if r.Version == "" {
				return "", "", r.Path
			}
			path, version = r.Path, r.Version
		}
	}
	if version == "(devel)" {
		version = ""
	}
	return path, version, ""
}

// downloadModule is the module cache's directory of mod@version, downloaded
// if needed.
func downloadModule(ctx context.Context, mod, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: the version is given
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", mod, version, err, strings.TrimSpace(stderr.String()))
	}
	var info struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", mod, version, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", mod, version, info.Error)
	}
	return info.Dir, nil
}

// Kustomize renders a kustomization directory as `kubectl kustomize` does: with
// the same kustomize (sigs.k8s.io/kustomize/api, which k8s.io/cli-runtime and so
// the trainyard CLI link anyway) and the options kubectl gives it, in this
// process, so that a cluster needs no kubectl to render JobSet's and Kueue's
// manifests (make run builds none).
func Kustomize(dir string) ([]byte, error) {
	o := krusty.MakeDefaultOptions()
	o.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(o).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return m.AsYaml()
}

// decodeYAML splits a multi-document YAML stream into objects, skipping empty documents.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
}

// readYAMLFiles decodes every *.yaml file of dir (not recursive), in name order.
func readYAMLFiles(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		o, err := decodeYAML(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

func isWebhookConfiguration(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().Group == "admissionregistration.k8s.io" &&
		(u.GetKind() == "MutatingWebhookConfiguration" || u.GetKind() == "ValidatingWebhookConfiguration")
}

// webhookClientConfig is what replaces a `service:` client config: the webhook
// server on the loopback interface, trusted through the cluster CA.
type webhookClientConfig struct {
	port     int
	caBundle []byte // PEM
}

func (w webhookClientConfig) rewrite(cc map[string]interface{}, defaultPath string) error {
	path := defaultPath
	if svc, ok := cc["service"].(map[string]interface{}); ok {
		if p, ok := svc["path"].(string); ok && p != "" {
			path = p
		}
	} else if _, hasURL := cc["url"]; !hasURL {
		return fmt.Errorf("clientConfig has neither service nor url")
	}
	if path == "" {
		path = "/"
	}
	delete(cc, "service")
	cc["url"] = fmt.Sprintf("https://127.0.0.1:%d%s", w.port, path)
	// unstructured carries []byte fields as base64 strings, as JSON does.
	cc["caBundle"] = base64Std(w.caBundle)
	return nil
}

// localWebhookConfigurations keeps the admission webhook configurations among objs,
// renames each to prefix+name unless it already starts with prefix (controller-gen
// names every project's configurations alike), and points every webhook at
// https://127.0.0.1:<port><path>. Only webhooks[].clientConfig is changed.
func localWebhookConfigurations(objs []*unstructured.Unstructured, prefix string, w webhookClientConfig) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if !isWebhookConfiguration(u) {
			continue
		}
		u = u.DeepCopy()
		if !strings.HasPrefix(u.GetName(), prefix) {
			u.SetName(prefix + u.GetName())
		}
		hooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		for i, h := range hooks {
			hm, ok := h.(map[string]interface{})
			if !ok {
				return nil, fmt.Errorf("%s %s: webhooks[%d] is not an object", u.GetKind(), u.GetName(), i)
			}
			cc, ok := hm["clientConfig"].(map[string]interface{})
			if !ok {
				return nil, fmt.Errorf("%s %s: webhooks[%d] has no clientConfig", u.GetKind(), u.GetName(), i)
			}
			if err := w.rewrite(cc, ""); err != nil {
				return nil, fmt.Errorf("%s %s: webhooks[%d]: %w", u.GetKind(), u.GetName(), i, err)
			}
		}
		if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no webhook configurations found")
	}
	return out, nil
}

// localConversion points the conversion webhook of every CRD among objs that has one
// (spec.conversion.strategy Webhook) at https://127.0.0.1:<port><path>. Only
// spec.conversion.webhook.clientConfig is changed; other objects are dropped.
func localConversion(objs []*unstructured.Unstructured, w webhookClientConfig) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		u = u.DeepCopy()
		strategy, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy")
		if strategy == "Webhook" {
			cc, found, err := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook", "clientConfig")
			if err != nil || !found {
				return nil, fmt.Errorf("CRD %s: conversion strategy Webhook without clientConfig", u.GetName())
			}
			if err := w.rewrite(cc, "/convert"); err != nil {
				return nil, fmt.Errorf("CRD %s: %w", u.GetName(), err)
			}
			if err := unstructured.SetNestedMap(u.Object, cc, "spec", "conversion", "webhook", "clientConfig"); err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// writeManifests saves what is applied under StateDir/manifests, for people debugging.
func writeManifests(path string, objs []*unstructured.Unstructured) error {
	var b bytes.Buffer
	for _, o := range objs {
		j, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(j)
		b.WriteString("\n")
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
