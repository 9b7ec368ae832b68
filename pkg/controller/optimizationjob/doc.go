// Package optimizationjob is the OptimizationJob job kind: Kubeflow
// Trainer's hyperparameter search API (trainer.kubeflow.org/v1alpha1,
// KEP-2605), run in process on the generic reconciler of
// pkg/controller/jobframework. Its children are TrainJobs, one per trial,
// which the TrainJob kind runs like any other (gang, queue, progress).
//
//   - trials.go: a trial is the TrainJob <name>-trial-<i> made from
//     spec.trainJobTemplate, labelled with the OptimizationJob's name, its
//     parameters as annotations and as KUBEFLOW_TRAINER_OPT_<NAME> in the
//     trainer's env; its parameters come from package search, a pure
//     function of the spec, the seed and i, so a trial made again after a
//     restart is the same trial (and its create is refused as existing);
//   - adapter.go: the plan (the next trials, at most parallelTrials
//     unfinished at a time, never a trial index made before) and the
//     Lifecycle (a finished OptimizationJob makes no trial);
//   - status.go: the trials' records, counts, the best trial
//     (status.result), conditions and events, all from what was observed;
//   - validation.go, webhook.go: field-path errors, from the webhook and,
//     when webhooks are off, in status;
//   - kind.go (Kind, flags, Helm value), metrics.go, view.go (CLI).
package optimizationjob
