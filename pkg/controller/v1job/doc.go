// Package v1job is what the kubeflow.org/v1 job kinds other than PyTorchJob
// share (MPIJob, XGBoostJob): a library of kinds (only kind packages import
// it; TestOnlyTheListImportsKinds). A kind describes itself once, in a Def
// (its roles, container, port, defaults, the role whose success is the
// job's, its environment and its own plugins), and gets from here:
//
//   - v1's in-memory defaults and validation with field paths (defaults.go,
//     validation.go), run by the controller and by its webhooks alike, so that
//     bad input shows in status when webhooks are off;
//   - its runtime: a JobSet template with one one-pod Job per replica, named and
//     labelled as v1 named and labelled pods, restart policies mapped onto
//     Jobs (convert.go, labels.go), and v1's per-replica headless Services
//     (services.go);
//   - its adapter on the generic reconciler: v1 conditions with the kind's
//     reasons, replica counts, cleanPodPolicy, activeDeadlineSeconds and
//     ttlSecondsAfterFinished through jobframework.Lifecycle (adapter.go,
//     status.go, conditions.go);
//   - its jobframework.Kind (flags --enable-<kind>, --<kind>-concurrency; Helm
//     value), metrics, admission webhooks and CLI view (kind.go, metrics.go,
//     webhook.go, view.go).
//
// PyTorchJob (pkg/controller/pytorchjob) predates this library and keeps its
// own copy of these rules; moving it here is a separate change.
package v1job
