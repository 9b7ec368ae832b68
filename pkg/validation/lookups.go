package validation

import (
	"context"
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/runtime"
)

// ValidateLookups runs the checks that need to read other objects of the
// cluster, which the pure plugins cannot: today, that a Volcano PodGroup's
// PriorityClass exists. The admission webhook runs it, and so does the
// controller before a job's first JobSet, so that the same field error shows
// in status when the webhook is not installed.
func ValidateLookups(ctx context.Context, r client.Reader, req *runtime.Request, rt *runtime.Runtime) field.ErrorList {
	info, err := runtime.NewInfo(req, rt)
	if err != nil {
		return nil // the pure validation reports it
	}
	return validatePriorityClass(ctx, r, info)
}

// systemPriorityClasses exist in every cluster (the API server creates them).
var systemPriorityClasses = map[string]bool{"system-cluster-critical": true, "system-node-critical": true}

// validatePriorityClass checks that the priority class a Volcano PodGroup
// takes (Info.PriorityClassName) exists: Volcano would not place a group
// whose class is missing, and the Job controller could not create its pods.
func validatePriorityClass(ctx context.Context, r client.Reader, info *runtime.Info) field.ErrorList {
	if p := info.Runtime.Spec.PodGroupPolicy; p == nil || p.Volcano == nil {
		return nil
	}
	name := info.PriorityClassName()
	if name == "" || systemPriorityClasses[name] {
		return nil
	}
	path := field.NewPath("spec", "templateSpec", "priorityClassName")
	err := r.Get(ctx, client.ObjectKey{Name: name}, &schedulingv1.PriorityClass{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("PriorityClass %q doesn't exist: %v", name, err))}
	default:
		return field.ErrorList{field.InternalError(path, fmt.Errorf("looking up PriorityClass %q: %w", name, err))}
	}
}
