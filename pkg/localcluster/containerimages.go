package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/trainyard/trainyard/pkg/images"
)

// What runs Kubeflow's PyTorch guide on container nodes (test/deployed_e2e,
// make run RUN_ARGS=-containers) rather than on a process node.

// ImageArchive is the OCI archive `make images` writes for an image
// (trainyard-manager, trainyard-initializer, torch, mpi, xgboost).
func ImageArchive(repo, name string) string {
	return images.ArchivePath(filepath.Join(repo, "bin", "images"), name)
}

// ImageRef is the name an archive gives its image in a node's containerd.
func ImageRef(archive string) (string, error) {
	return images.ArchiveRef(archive)
}

// FashionMNISTRuntimeForContainers is examples/fashion-mnist/runtime.yaml for
// container nodes: the initializer and torch images of make images (read from
// bin/images), never pulled, and Debian's Fashion-MNIST (dataset-fashion-mnist,
// which make debian-packages installs on this machine, the nodes' host)
// mounted read-only where STORAGE_URI points. The shared "initializer" volume
// is a hostPath, root's: the initializer (user 65532 in its image) runs as
// root to write into it, as the process node's does.
func FashionMNISTRuntimeForContainers(repo string) (*unstructured.Unstructured, error) {
	initializer, err := ImageRef(ImageArchive(repo, "trainyard-initializer"))
	if err != nil {
		return nil, err
	}
	torch, err := ImageRef(ImageArchive(repo, "torch"))
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(repo, FashionMNISTRuntimeFile))
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&u.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", FashionMNISTRuntimeFile, err)
	}
	rjs, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "replicatedJobs")
	if err != nil {
		return nil, err
	}
	for _, rj := range rjs {
		pod, _, err := unstructured.NestedMap(rj.(map[string]any), "template", "spec", "template", "spec")
		if err != nil {
			return nil, err
		}
		ctr := pod["containers"].([]any)[0].(map[string]any)
		switch ctr["name"] {
		case "dataset-initializer":
			ctr["image"] = initializer
			ctr["command"] = []any{"/trainyard-initializer", "dataset"}
			ctr["securityContext"] = map[string]any{"runAsUser": int64(0)}
			ctr["volumeMounts"] = append(ctr["volumeMounts"].([]any),
				map[string]any{"name": "datasets", "mountPath": "/usr/share/datasets/fashion-mnist", "readOnly": true})
			pod["volumes"] = append(pod["volumes"].([]any),
				map[string]any{"name": "datasets", "hostPath": map[string]any{"path": "/usr/share/datasets/fashion-mnist", "type": "Directory"}})
		case "node":
			ctr["image"] = torch
		}
		ctr["imagePullPolicy"] = "Never"
		if err := unstructured.SetNestedMap(rj.(map[string]any), pod, "template", "spec", "template", "spec"); err != nil {
			return nil, err
		}
	}
	if err := unstructured.SetNestedSlice(u.Object, rjs, "spec", "template", "spec", "replicatedJobs"); err != nil {
		return nil, err
	}
	return u, nil
}
