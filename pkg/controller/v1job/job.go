package v1job

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Job is a kubeflow.org/v1 job of any kind: its replica specs, run policy
// and status, whatever the kind calls them.
type Job interface {
	client.Object
	ReplicaSpecs() map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec
	JobRunPolicy() *kubeflowv1.RunPolicy
	JobStatus() *kubeflowv1.JobStatus
}

// PodInfo is what a kind's Pod hook knows of the pod it completes.
type PodInfo struct {
	// Type and Index are the replica's role and index.
	Type  kubeflowv1.ReplicaType
	Index int
	// ClusterDomain is the cluster's DNS domain (jobframework.Manager's).
	ClusterDomain string
}

// Def describes a kubeflow.org/v1 kind: everything this library needs to run it.
type Def struct {
	// Kind is the API kind ("MPIJob"); Name its lower-case name ("mpijob"),
	// that of its flags and CLI; Resource its plural ("mpijobs"); Value its
	// Helm value ("mpiJob").
	Kind, Name, Resource, Value string
	// OperatorName is training.kubeflow.org/operator-name on its pods.
	OperatorName string
	// SpecsField is the JSON name of the replica specs ("mpiReplicaSpecs").
	SpecsField string
	// Roles are its replica types, in the order v1 lists them.
	Roles []kubeflowv1.ReplicaType
	// Required roles must be present; Single roles have exactly one replica.
	Required, Single []kubeflowv1.ReplicaType
	// DefaultReplicas is the replica count of a role that sets none.
	DefaultReplicas func(kubeflowv1.ReplicaType) int32
	// Container is the container every replica must have (v1's default
	// container name); "" when the kind requires none. It is also the one
	// whose log `trainyard logs` prints and whose exit code ExitCode reads,
	// when present.
	Container string
	// PortName and Port are the port v1 adds to Container (or the first
	// container) unless it has one by that name; "" for none.
	PortName string
	Port     int32
	// RestartPolicy is the restart policy of a replica that sets none.
	RestartPolicy kubeflowv1.RestartPolicy
	// SuccessRole is the role whose success is the job's.
	SuccessRole kubeflowv1.ReplicaType
	// MasterRole is the role whose pod carries job-role=master ("" none).
	MasterRole kubeflowv1.ReplicaType
	// Services: v1 made a headless Service per replica.
	Services bool
	// FailOnEviction: an evicted pod of the success role fails the job
	// (<Kind>Evicted), as v1's MPIJob did.
	FailOnEviction bool

	// New returns an empty job; NewList an empty list and Items its jobs.
	New     func() Job
	NewList func() client.ObjectList
	Items   func(client.ObjectList) []Job

	// DefaultKind applies the kind's own defaults in place (after the shared ones).
	DefaultKind func(Job)
	// ValidateKind checks the kind's own fields (after the shared checks).
	ValidateKind func(Job) field.ErrorList
	// Pod completes a replica's pod template (the kind's environment,
	// volumes, command) of the defaulted job.
	Pod func(job Job, p PodInfo, pod *PodTemplate) error
	// OwnPlugins are the kind's own pipeline plugins (its ConfigMap, ...),
	// run before the Services and plugins.ForPodTemplates.
	OwnPlugins func() []framework.Plugin
}

// specsPath is the field path of the replica specs.
func (d *Def) specsPath() *field.Path { return field.NewPath("spec", d.SpecsField) }

// Defaulted returns a copy of job with v1's defaults (Default), as v1 applied
// them in memory on every pass.
func (d *Def) Defaulted(job Job) Job {
	out := job.DeepCopyObject().(Job)
	d.normalizeKeys(out.ReplicaSpecs())
	d.ApplyDefaults(out)
	return out
}

// replicas returns the replica count of a (defaulted) role, 0 when it is absent.
func replicas(job Job, rtype kubeflowv1.ReplicaType) int32 {
	if rs := job.ReplicaSpecs()[rtype]; rs != nil && rs.Replicas != nil {
		return *rs.Replicas
	}
	return 0
}

// Replicas returns the replica count of a defaulted job's role.
func Replicas(job Job, rtype kubeflowv1.ReplicaType) int32 { return replicas(job, rtype) }

// RolesOf lists the job's roles in the kind's order.
func (d *Def) RolesOf(job Job) []kubeflowv1.ReplicaType {
	var out []kubeflowv1.ReplicaType
	for _, t := range d.Roles {
		if job.ReplicaSpecs()[t] != nil {
			out = append(out, t)
		}
	}
	return out
}
