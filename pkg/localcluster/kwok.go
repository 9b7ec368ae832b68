package localcluster

import (
	"embed"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Per-pod kwok controls honoured by the pod/general and pod/chaos stages and
// Trainyard's pod-complete stage (KwokStages).
const (
	// KwokPodCompleteDelay keeps a Job's pod Running for this long (a Go duration,
	// e.g. "30s") before kwok completes it; KwokPodCompleteJitter is the upper bound
	// of a random delay (the delay is then between the two). Without a jitter the
	// delay is exact. Either overrides what the command says (KwokPodLife).
	KwokPodCompleteDelay  = "pod-complete.stage.kwok.x-k8s.io/delay"
	KwokPodCompleteJitter = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
	// KwokPodFailLabel set to "true" on a pod makes its containers terminate with an
	// error once running, so the pod ends Failed.
	KwokPodFailLabel = "pod-container-running-failed.stage.kwok.x-k8s.io"
)

// How long a Job's pod runs on a kwok node once it is Running and Ready
// follows its containers' command and args (Trainyard's pod-complete stage,
// kwokstages/pod-complete.yaml, has the exact expressions; docs/local-cluster.md
// says it for users):
//
//   - the annotations KwokPodCompleteDelay (and KwokPodCompleteJitter) win;
//   - a server (sshd, as an MPI node runs it, or `sleep infinity`) runs until
//     its Job is stopped (JobSet deletes a finished JobSet's Jobs);
//   - `sleep N` runs N seconds, also as `sh -c "sleep N"` and `mpirun … sleep N`;
//   - anything else completes after 1 s plus a random 0–5 s, kwok's default.

// trainyardStage prefixes the stages of KwokStages that are Trainyard's own.
const trainyardStage = "trainyard/"

//go:embed kwokstages/*.yaml
var kwokStageFiles embed.FS

// kwokStage reads a stage of KwokStages: Trainyard's from this package, kwok's
// from its module directory.
func kwokStage(kwokDir, name string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(name, trainyardStage); ok {
		return kwokStageFiles.ReadFile("kwokstages/" + rest)
	}
	return os.ReadFile(filepath.Join(kwokDir, "kustomize", "stage", name))
}

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
