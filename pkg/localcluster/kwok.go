package localcluster

import "time"

// Per-pod kwok controls honoured by the pod/general and pod/chaos stages (KwokStages).
const (
	// KwokPodCompleteDelay keeps a Job's pod Running for this long (a Go duration,
	// e.g. "30s") before kwok completes it; KwokPodCompleteJitter is the upper bound
	// of a random delay (the delay is then between the two).
	KwokPodCompleteDelay  = "pod-complete.stage.kwok.x-k8s.io/delay"
	KwokPodCompleteJitter = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
	// KwokPodFailLabel set to "true" on a pod makes its containers terminate with an
	// error once running, so the pod ends Failed.
	KwokPodFailLabel = "pod-container-running-failed.stage.kwok.x-k8s.io"
)

// KwokDelayAnnotations returns pod annotations that make kwok's pod-create,
// pod-ready, pod-complete and pod-delete transitions take between delay and jitter
// each, instead of 1s plus up to 5s.
func KwokDelayAnnotations(delay, jitter time.Duration) map[string]string {
	a := map[string]string{}
	for _, stage := range []string{"pod-create", "pod-ready", "pod-complete", "pod-delete"} {
		a[stage+".stage.kwok.x-k8s.io/delay"] = delay.String()
		a[stage+".stage.kwok.x-k8s.io/jitter-delay"] = jitter.String()
	}
	return a
}
