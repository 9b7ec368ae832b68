package controller

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var curveKeys = regexp.MustCompile(`(?m)^    public-key = "(.{40})"\n    secret-key = "(.{40})"$`)

// waitCurveSecret waits for TrainJob name's CURVE Secret and returns it with
// its secret key.
func waitCurveSecret(t *testing.T, ns, name string) (*corev1.Secret, string) {
	t.Helper()
	var s corev1.Secret
	eventually(t, func() error {
		return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name + "-flux-curve"}, &s)
	})
	require.Equal(t, corev1.SecretTypeOpaque, s.Type)
	require.Len(t, s.Data, 1)
	m := curveKeys.FindStringSubmatch(string(s.Data["curve.cert"]))
	require.NotNil(t, m, "curve.cert of %s:\n%s", name, s.Data["curve.cert"])
	job := getTrainJob(t, ns, name)
	require.True(t, metav1.IsControlledBy(&s, job), "Secret %s is not controlled by its TrainJob", s.Name)
	// Issue #30: the key was sha256 of the TrainJob's UID, which anyone who
	// can read the TrainJob can compute.
	uidHash := sha256.Sum256([]byte(job.UID))
	require.False(t, bytes.Equal(z85Decode(m[2]), uidHash[:]), "the secret key of %s is sha256 of its UID", name)
	return &s, m[2]
}

// z85Decode decodes ZeroMQ's Z85 (5 characters to 4 bytes).
func z85Decode(s string) []byte {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
	var out []byte
	for i := 0; i+5 <= len(s); i += 5 {
		var v uint32
		for _, c := range s[i : i+5] {
			v = v*85 + uint32(strings.IndexRune(alphabet, c))
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out
}

// Two Flux TrainJobs get CURVE Secrets with different keys, made once: a later
// pass and a restart of the manager leave each Secret as it is.
func TestFluxCurveSecretIsRandomAndCreatedOnce(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/flux-distributed.yaml")
	for _, name := range []string{"flux-a", "flux-b"} {
		require.NoError(t, env.Client.Create(ctx(), &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "flux-distributed"},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"hostname"}}},
		}))
	}
	a, keyA := waitCurveSecret(t, ns, "flux-a")
	_, keyB := waitCurveSecret(t, ns, "flux-b")
	require.NotEqual(t, keyA, keyB, "two TrainJobs got the same CURVE key")
	waitJobSet(t, ns, "flux-a")

	unchanged := func() error {
		var now corev1.Secret
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(a), &now); err != nil {
			return err
		}
		if now.ResourceVersion != a.ResourceVersion || string(now.Data["curve.cert"]) != string(a.Data["curve.cert"]) {
			return fmt.Errorf("the CURVE Secret changed (resourceVersion %s -> %s)", a.ResourceVersion, now.ResourceVersion)
		}
		return nil
	}
	// A label change reconciles the TrainJob.
	job := getTrainJob(t, ns, "flux-a")
	job.Labels = map[string]string{"touched": "yes"}
	require.NoError(t, env.Client.Update(ctx(), job))
	consistently(t, 2*time.Second, unchanged)

	// A new manager (an upgrade, a failover) finds the Secret and keeps it.
	env.StopManager()
	t.Cleanup(func() { _ = env.StartManager(framework.ManagerOptions{}) })
	require.NoError(t, env.StartManager(framework.ManagerOptions{}))
	waitCreated(t, ns, "flux-a")
	consistently(t, 2*time.Second, unchanged)
}
