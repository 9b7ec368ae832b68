// Package pytorchjob is the legacy kubeflow.org/v1 PyTorchJob kind, all of
// it: its jobframework.Kind (types, flags --enable-pytorchjob,
// --pytorchjob-concurrency and v1's --gang-scheduler-name), its adapter on
// the generic reconciler, its admission webhooks, its metrics and its CLI
// view.
//
// A PyTorchJob is defaulted in memory and validated as training-operator
// v1.9 did (defaults.go, validation.go; the webhooks run the same checks),
// then converted into a runtime (a JobSet template with one replicated job
// per replica, each pod with v1's environment, labels and restart policy:
// convert.go, env.go) and a request (its identity, suspension and gang
// policy), and run through a pipeline of its own Services plugin and the
// plugins of every kind that brings complete pod templates
// (plugins.ForPodTemplates: gang PodGroups, the JobSet). Its status follows,
// purely, from what was observed: v1 conditions and replica counts
// (conditions.go, status.go), v1's job-name label on its pods (pods.go),
// cleanPodPolicy; the framework applies activeDeadlineSeconds and
// ttlSecondsAfterFinished (jobframework.Lifecycle).
package pytorchjob
