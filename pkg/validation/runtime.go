package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// ancestorContainers: the container each TrainJob-bound replicated job must have.
var ancestorContainers = map[string]string{
	trainer.AncestorTrainer:            trainer.NodeContainer,
	trainer.AncestorDatasetInitializer: trainer.DatasetInitializerContainer,
	trainer.AncestorModelInitializer:   trainer.ModelInitializerContainer,
}

// ValidateRuntimeSpec checks what Trainyard needs of a runtime: replicated job
// names of at most 20 characters (Kubeflow Trainer v2.4); exactly one trainer
// job, run once (replicas 1), with a "node" container; initializer jobs
// likewise with their containers; node and MPI slot counts of at least 1. It warns about framework policies that no
// plugin of fw runs.
func ValidateRuntimeSpec(fw *framework.Framework, spec *trainer.TrainingRuntimeSpec) ([]string, field.ErrorList) {
	var errs field.ErrorList
	warnings := fw.RuntimeWarnings(spec)
	rjPath := field.NewPath("spec", "template", "spec", "replicatedJobs")
	seen := map[string]string{}
	for i, rj := range spec.Template.Spec.ReplicatedJobs {
		if err := runtime.CheckReplicatedJobName(rjPath.Index(i).Child("name"), rj.Name); err != nil {
			errs = append(errs, err)
		}
		ancestor := rj.Template.Labels[trainer.AncestorLabel]
		if ancestor == "" {
			continue
		}
		path := rjPath.Index(i)
		container, known := ancestorContainers[ancestor]
		if !known {
			errs = append(errs, field.NotSupported(path.Child("template", "metadata", "labels").Key(trainer.AncestorLabel), ancestor,
				[]string{trainer.AncestorTrainer, trainer.AncestorDatasetInitializer, trainer.AncestorModelInitializer}))
			continue
		}
		if other, dup := seen[ancestor]; dup {
			errs = append(errs, field.Duplicate(path.Child("template", "metadata", "labels").Key(trainer.AncestorLabel),
				fmt.Sprintf("%s (also on replicated job %q)", ancestor, other)))
		}
		seen[ancestor] = rj.Name
		if rj.Replicas > 1 {
			errs = append(errs, field.Invalid(path.Child("replicas"), rj.Replicas,
				fmt.Sprintf("must be 1 for the %s job: its scale is the TrainJob's node count", ancestor)))
		}
		has := false
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			has = has || c.Name == container
		}
		if !has {
			errs = append(errs, field.Required(path.Child("template", "spec", "template", "spec", "containers"),
				fmt.Sprintf("the %s job must have a container named %q", ancestor, container)))
		}
	}
	if len(spec.Template.Spec.ReplicatedJobs) > 0 {
		if _, ok := seen[trainer.AncestorTrainer]; !ok {
			errs = append(errs, field.Required(rjPath, fmt.Sprintf("one replicated job must be labelled %s=%s (the job that runs the training nodes)",
				trainer.AncestorLabel, trainer.AncestorTrainer)))
		}
	} else {
		errs = append(errs, field.Required(rjPath, "a runtime needs at least one replicated job"))
	}
	if mp := spec.MLPolicy; mp != nil {
		if mp.NumNodes != nil {
			if err := runtime.CheckNumNodes(field.NewPath("spec", "mlPolicy", "numNodes"), *mp.NumNodes); err != nil {
				errs = append(errs, err)
			}
		}
		if mp.MPI != nil && mp.MPI.NumProcPerNode != nil {
			if err := runtime.CheckSlots(field.NewPath("spec", "mlPolicy", "mpi", "numProcPerNode"), *mp.MPI.NumProcPerNode); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return warnings, errs
}
