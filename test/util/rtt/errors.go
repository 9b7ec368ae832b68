package rtt

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// FieldErr is the part of a *field.Error that tests compare: its type and path.
type FieldErr struct {
	Type  field.ErrorType
	Field string
}

func (e FieldErr) String() string { return fmt.Sprintf("%s: %s", e.Field, e.Type) }

// FieldErrs summarises a field.ErrorList (nil for an empty list).
func FieldErrs(errs field.ErrorList) []FieldErr {
	var out []FieldErr
	for _, e := range errs {
		out = append(out, FieldErr{Type: e.Type, Field: e.Field})
	}
	return out
}

// FieldErrDetail is a FieldErr with its message, for tests that compare the
// message whole.
type FieldErrDetail struct {
	Field  string
	Type   field.ErrorType
	Detail string
}

// FieldErrDetails summarises a field.ErrorList with each error's message (nil
// for an empty list).
func FieldErrDetails(errs field.ErrorList) []FieldErrDetail {
	var out []FieldErrDetail
	for _, e := range errs {
		out = append(out, FieldErrDetail{Field: e.Field, Type: e.Type, Detail: e.Detail})
	}
	return out
}

// FieldErrsOf summarises the field errors inside err: a *framework.InvalidError
// gives its list, a (wrapped) *field.Error gives itself. Any other non-nil error
// gives one FieldErr with Type "" and the message as Field, so that it shows in
// a diff.
func FieldErrsOf(err error) []FieldErr {
	if err == nil {
		return nil
	}
	var ie *framework.InvalidError
	if errors.As(err, &ie) {
		return FieldErrs(ie.Errs)
	}
	var fe *field.Error
	if errors.As(err, &fe) {
		return []FieldErr{{Type: fe.Type, Field: fe.Field}}
	}
	return []FieldErr{{Field: "not a field error: " + err.Error()}}
}
