package processnode_e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/prereq"
)

var xgbResultRE = regexp.MustCompile(`XGBOOST_RESULT task=(\d+) rank=(\d+) world_size=(\d+) train_rows=(\d+) rounds=(\d+) first_logloss=([0-9.]+) final_logloss=([0-9.]+) accuracy=([0-9.]+)`)

// TestXGBoost trains examples/xgboost on two nodes of the shipped
// xgboost-distributed runtime: the tracker on node 0 from the DMLC_* env
// Trainyard injects, both workers in one Rabit ring, each on half the rows.
// Both must report the same final test logloss (one model), lower than after
// the first round, and the TrainJob must be Complete with its jobsStatus.
func TestXGBoost(t *testing.T) {
	prereq.Require(t, exec.Command("/usr/bin/python3", "-c", "import xgboost, sklearn").Run() == nil,
		"/usr/bin/python3 cannot import xgboost and sklearn (Debian's python3-xgboost, python3-sklearn): run `make debian-packages`")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns, job = "xgboost-e2e", "xgboost"
	createNamespace(t, ctx, ns)
	script, err := os.ReadFile(filepath.Join(repo, "examples", "xgboost", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "xgboost-script", Namespace: ns}, Data: map[string]string{"train.py": string(script)}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := loadExample(t, "xgboost", "trainjob.yaml")
	u.SetNamespace(ns)
	if err := c.Client().Create(ctx, u); err != nil {
		t.Fatalf("creating TrainJob: %v", err)
	}

	cond := waitFinished(t, ctx, ns, job)
	if cond.Type != "Complete" {
		t.Fatalf("TrainJob %s: %s/%s: %s", job, cond.Type, cond.Reason, cond.Message)
	}
	logs := podLogs(t, ctx, ns, job)
	if len(logs) != 2 {
		t.Fatalf("logs of %d pods, want 2", len(logs))
	}
	finals := map[string]string{}
	for idx, l := range logs {
		m := xgbResultRE.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("pod %s: no XGBOOST_RESULT line:\n%s", idx, l)
			continue
		}
		t.Logf("task %s: rank %s of %s, %s rows, logloss %s -> %s, accuracy %s", m[1], m[2], m[3], m[4], m[6], m[7], m[8])
		if m[1] != idx || m[2] != idx || m[3] != "2" {
			t.Errorf("pod %s ran as task %s, rank %s of %s; want task and rank %s of 2", idx, m[1], m[2], m[3], idx)
		}
		if want := "DMLC_TRACKER_URI=" + job + "-node-0-0." + job + " DMLC_TRACKER_PORT=29500 DMLC_NUM_WORKER=2"; !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(l) {
			t.Errorf("pod %s: no %q in the log", idx, want)
		}
		first, _ := strconv.ParseFloat(m[6], 64)
		final, _ := strconv.ParseFloat(m[7], 64)
		if !(final < first) {
			t.Errorf("pod %s: logloss did not fall: %s -> %s", idx, m[6], m[7])
		}
		finals[idx] = m[7] + " " + m[8]
	}
	if len(finals) == 2 && finals["0"] != finals["1"] {
		t.Errorf("the workers disagree on the final metric (not one model): %q vs %q", finals["0"], finals["1"])
	}

	var tj trainer.TrainJob
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &tj); err != nil {
		t.Fatal(err)
	}
	if len(tj.Status.JobsStatus) != 1 || tj.Status.JobsStatus[0].Name != "node" || ptr.Deref(tj.Status.JobsStatus[0].Succeeded, 0) != 1 {
		t.Errorf("jobsStatus %+v, want the node job succeeded", tj.Status.JobsStatus)
	}
}
