// Package webhooks holds what the job kinds' admission webhooks share:
// turning field errors into the API's Invalid status, and reading from the
// manager's cache with a live read on a miss. Each kind's webhooks (its
// defaulting and validation, with field paths) live in its own package and
// are registered by its jobframework.Kind.SetupWebhooks, only when the kind
// is enabled; the checks are the ones the kind's controller runs too, so
// that with webhooks off the same field errors reach the job's status.
package webhooks

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Invalid turns field errors into the API's Invalid status, so that kubectl
// prints each field and its message; nil when there are none.
func Invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gk, name, errs)
}
