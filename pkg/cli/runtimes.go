package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/view"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// Runtime is what the CLI shows of a TrainingRuntime or ClusterTrainingRuntime:
// the Kubeflow SDK's Runtime (name, framework, number of nodes, device and device
// count) plus where it lives.
type Runtime struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	// Framework is the trainer.kubeflow.org/framework label.
	Framework string `json:"framework"`
	NumNodes  int32  `json:"numNodes"`
	// Device and DeviceCount come from the node container's limits (see Device),
	// the count for all nodes together.
	Device      string `json:"device"`
	DeviceCount string `json:"deviceCount"`
	Image       string `json:"image,omitempty"`
	// Entrypoint runs a script on this runtime: torchrun for torch runtimes,
	// python3 otherwise.
	Entrypoint string `json:"entrypoint"`
}

// Entrypoints of scripts, by the runtime's ML policy.
const (
	TorchEntrypoint  = "torchrun"
	PythonEntrypoint = "python3"
)

// NewRuntime describes a runtime object (kind is TrainingRuntime or
// ClusterTrainingRuntime), deriving its nodes and devices as the SDK does.
func NewRuntime(kind, namespace, name string, labels map[string]string, spec trainer.TrainingRuntimeSpec) Runtime {
	rt := Runtime{Name: name, Kind: kind, Namespace: namespace, Framework: labels[trainer.FrameworkLabel],
		NumNodes: 1, Device: Unknown, DeviceCount: Unknown, Entrypoint: PythonEntrypoint}
	mp := spec.MLPolicy
	if mp != nil && mp.NumNodes != nil {
		rt.NumNodes = *mp.NumNodes
	}
	if mp != nil && mp.Torch != nil {
		rt.Entrypoint = TorchEntrypoint
	}
	if c := trainerContainer(&spec); c != nil {
		rt.Image = c.Image
		rt.Device, rt.DeviceCount = Device(c.Resources)
	}
	// A fixed process count per node is the device count per node.
	if mp != nil && mp.MPI != nil && mp.MPI.NumProcPerNode != nil {
		rt.DeviceCount = strconv.Itoa(int(*mp.MPI.NumProcPerNode))
	}
	if mp != nil && mp.Flux != nil && mp.Flux.NumProcPerNode != nil {
		rt.DeviceCount = strconv.Itoa(int(*mp.Flux.NumProcPerNode))
	}
	if mp != nil && mp.Torch != nil && mp.Torch.NumProcPerNode != nil && mp.Torch.NumProcPerNode.Type == intstr.Int {
		rt.DeviceCount = strconv.Itoa(int(mp.Torch.NumProcPerNode.IntVal))
	}
	rt.DeviceCount = view.TimesNodes(rt.DeviceCount, rt.NumNodes)
	return rt
}

// trainerContainer is the "node" container of the replicated job labelled as the
// trainer step.
func trainerContainer(spec *trainer.TrainingRuntimeSpec) *corev1.Container {
	return runtime.TrainerContainer(&spec.Template.Spec)
}

// ListRuntimes lists the ClusterTrainingRuntimes and the namespace's
// TrainingRuntimes, namespaced first, each group by name. Runtimes without the
// framework label are left out, as the SDK does; skipped names them. A namespace
// whose TrainingRuntimes cannot be listed (RBAC) is reported in warnings.
func ListRuntimes(ctx context.Context, c client.Client, namespace string) (list []Runtime, skipped, warnings []string, err error) {
	var nsList trainer.TrainingRuntimeList
	if err := c.List(ctx, &nsList, client.InNamespace(namespace)); err != nil {
		if !missingOrForbidden(err) {
			return nil, nil, nil, fmt.Errorf("listing TrainingRuntimes in namespace %s: %w", namespace, err)
		}
		warnings = append(warnings, fmt.Sprintf("TrainingRuntimes of namespace %s not listed: %v", namespace, err))
	}
	var clList trainer.ClusterTrainingRuntimeList
	if err := c.List(ctx, &clList); err != nil {
		return nil, nil, nil, fmt.Errorf("listing ClusterTrainingRuntimes: %w", err)
	}
	var all []Runtime
	for _, rt := range nsList.Items {
		all = append(all, NewRuntime(trainer.TrainingRuntimeKind, rt.Namespace, rt.Name, rt.Labels, rt.Spec))
	}
	for _, rt := range clList.Items {
		all = append(all, NewRuntime(trainer.ClusterTrainingRuntimeKind, "", rt.Name, rt.Labels, rt.Spec))
	}
	sort.SliceStable(all, func(i, j int) bool {
		if (all[i].Namespace != "") != (all[j].Namespace != "") {
			return all[i].Namespace != ""
		}
		return all[i].Name < all[j].Name
	})
	for _, rt := range all {
		if rt.Framework == "" {
			skipped = append(skipped, rt.Kind+" "+rt.Name)
			continue
		}
		list = append(list, rt)
	}
	return list, skipped, warnings, nil
}

// GetRuntime finds a runtime by name as the SDK does: the namespace's
// TrainingRuntime first, else the ClusterTrainingRuntime.
func GetRuntime(ctx context.Context, c client.Client, namespace, name string) (Runtime, error) {
	var rt trainer.TrainingRuntime
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &rt)
	if err == nil {
		return NewRuntime(trainer.TrainingRuntimeKind, rt.Namespace, rt.Name, rt.Labels, rt.Spec), nil
	}
	if !missingOrForbidden(err) {
		return Runtime{}, fmt.Errorf("reading TrainingRuntime %s/%s: %w", namespace, name, err)
	}
	var crt trainer.ClusterTrainingRuntime
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &crt); err != nil {
		if apierrors.IsNotFound(err) {
			return Runtime{}, fmt.Errorf("runtime %q not found: no TrainingRuntime in namespace %s and no ClusterTrainingRuntime (see `trainyard runtimes`)", name, namespace)
		}
		return Runtime{}, fmt.Errorf("reading ClusterTrainingRuntime %s: %w", name, err)
	}
	return NewRuntime(trainer.ClusterTrainingRuntimeKind, "", crt.Name, crt.Labels, crt.Spec), nil
}

// missingOrForbidden: the object (or its kind) does not exist, or RBAC hides it.
func missingOrForbidden(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apimeta.IsNoMatchError(err)
}
