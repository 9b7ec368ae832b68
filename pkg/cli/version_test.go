package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/version"
)

func publicConfigMap(namespace string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: version.ConfigMapName}, Data: data}
}

func TestVersionCommand(t *testing.T) {
	clientLine := "Client: " + version.Get().String() + "\n"
	trainyard := version.ConfigMap(version.DefaultNamespace, "v0.1.0")
	cases := []struct {
		name       string
		objs       []corev1.ConfigMap
		env        string
		args       []string
		wantStdout string
		inStderr   string
	}{
		{
			name:       "Trainyard in its namespace",
			objs:       []corev1.ConfigMap{*trainyard},
			wantStdout: clientLine + "Server: v0.1.0 (Kubeflow Trainer API v2.4.0)\n",
		},
		{
			name:       "--system-namespace",
			objs:       []corev1.ConfigMap{*publicConfigMap("ops", map[string]string{"trainyard_version": "v0.2.0"})},
			args:       []string{"--system-namespace", "ops"},
			wantStdout: clientLine + "Server: v0.2.0\n",
		},
		{
			name:       "$KUBEFLOW_SYSTEM_NAMESPACE, as the SDK reads it: Kubeflow Trainer",
			objs:       []corev1.ConfigMap{*publicConfigMap("kubeflow-system", map[string]string{"kubeflow_trainer_version": "v2.1.0"})},
			env:        "kubeflow-system",
			wantStdout: clientLine + "Server: Kubeflow Trainer v2.1.0 (not Trainyard)\n",
		},
		{
			name:       "no ConfigMap: unknown, and why",
			wantStdout: clientLine + "Server: unknown\n",
			inStderr:   `warning: the server's version is unknown: reading ConfigMap trainyard-system/kubeflow-trainer-public: configmaps "kubeflow-trainer-public" not found`,
		},
		{
			name:       "a ConfigMap without versions",
			objs:       []corev1.ConfigMap{*publicConfigMap(version.DefaultNamespace, map[string]string{"other": "x"})},
			wantStdout: clientLine + "Server: unknown\n",
			inStderr:   "has neither trainyard_version nor kubeflow_trainer_version",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvSystemNamespace, tc.env)
			var objs []client.Object
			for i := range tc.objs {
				objs = append(objs, &tc.objs[i])
			}
			f := newFakeCluster(t, objs...)
			code, out, errOut := f.run(append([]string{"version"}, tc.args...)...)
			if code != ExitOK || !strings.Contains(errOut, tc.inStderr) || tc.inStderr == "" && errOut != "" {
				t.Errorf("exit %d, stderr %q; want 0 and %q", code, errOut, tc.inStderr)
			}
			if diff := cmp.Diff(tc.wantStdout, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionCommandJSON(t *testing.T) {
	t.Setenv(EnvSystemNamespace, "")
	f := newFakeCluster(t, version.ConfigMap(version.DefaultNamespace, "v0.1.0"))
	code, out, errOut := f.run("version", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got Versions
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := Versions{Client: version.Get(), Server: &ServerVersions{Trainyard: "v0.1.0", KubeflowTrainer: version.KubeflowTrainerVersion,
		ConfigMap: "trainyard-system/kubeflow-trainer-public"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version -o json (-want +got):\n%s", diff)
	}
}

// Without a cluster, version still prints the client's version and exits 0.
func TestVersionWithoutCluster(t *testing.T) {
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut}
	e.connect = func() (*Clients, error) { return nil, errors.New("loading the kubeconfig: no configuration") }
	if code := run(context.Background(), e, []string{"version"}); code != ExitOK {
		t.Errorf("exit %d, want 0", code)
	}
	if diff := cmp.Diff("Client: "+version.Get().String()+"\nServer: unknown\n", out.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if !strings.Contains(errOut.String(), "the server's version is unknown: loading the kubeconfig: no configuration") {
		t.Errorf("stderr %q does not say why", errOut.String())
	}
}
