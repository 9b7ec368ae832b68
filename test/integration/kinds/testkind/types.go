// Package testkind is a job kind that exists only in tests: a TestJob
// (testkind.trainyard.io/v1, CRD in crd.yaml) runs an image on some nodes as
// a JobSet. It is the proof that a new job kind is one package plus one line:
// this package implements jobframework.Kind, and the test adds it to the
// manager's kinds (ManagerOptions.ExtraKinds) as pkg/controller.Kinds lists
// Trainyard's own. Nothing outside this package knows it.
package testkind

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of the test kind's API.
var GroupVersion = schema.GroupVersion{Group: "testkind.trainyard.io", Version: "v1"}

// Kind is the API kind.
const Kind = "TestJob"

// TestJob runs Spec.Image on Spec.Nodes pods.
type TestJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TestJobSpec   `json:"spec"`
	Status            TestJobStatus `json:"status,omitempty"`
}

// TestJobSpec is what to run.
type TestJobSpec struct {
	Image   string `json:"image"`
	Nodes   int32  `json:"nodes"`
	Suspend bool   `json:"suspend,omitempty"`
}

// TestJobStatus is what the controller saw.
type TestJobStatus struct {
	// JobSet names the job's JobSet once it exists.
	JobSet string `json:"jobSet,omitempty"`
	// Phase: Pending (no JobSet), Suspended, Running, Complete or Failed.
	Phase string `json:"phase,omitempty"`
	// Message says why the job is Pending with an error.
	Message string `json:"message,omitempty"`
}

// TestJobList is a list of TestJobs.
type TestJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TestJob `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (j *TestJob) DeepCopyObject() k8sruntime.Object { return j.DeepCopy() }

// DeepCopy copies the job (its fields are values, its metadata is copied deeply).
func (j *TestJob) DeepCopy() *TestJob {
	if j == nil {
		return nil
	}
	out := *j
	j.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (l *TestJobList) DeepCopyObject() k8sruntime.Object {
	out := &TestJobList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopy())
	}
	return out
}

// AddToScheme adds the test kind's types.
func AddToScheme(s *k8sruntime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &TestJob{}, &TestJobList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
