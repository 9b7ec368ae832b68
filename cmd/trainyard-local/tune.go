package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// The -tune flow (examples/fashion-mnist-tuning): the guide's model on real
// Fashion-MNIST as an OptimizationJob, through `trainyard optimize`: 4
// trials, 2 at a time, each one node of 1 CPU training 150 batches, searching
// the learning rate (log-uniform) and the batch size (categorical) for the
// smallest loss its rank 0 reports through the status server.
var tuneArgs = []string{
	"optimize", "--name", "tune-fashion-mnist", "--runtime", fashionRuntime,
	"--num-nodes", "1", "--resources", "cpu=1,memory=2Gi",
	"--metric", "loss", "--trials", "4", "--parallel", "2", "--seed", "1",
	"--param", "lr=loguniform:0.001:0.3", "--param", "batch_size=categorical:32,64,128",
	"--env", "FASHION_MNIST_EPOCHS=1", "--env", "FASHION_MNIST_MAX_STEPS=150",
	"--interval", "5s", "--timeout", "20m",
	fashionScript,
}

// tuneFashionMNIST runs the search, shows its trials and names the best.
func tuneFashionMNIST(ctx context.Context, c *localcluster.Cluster, repo string, start time.Time) int {
	f := &fashionCLI{bin: filepath.Join(repo, "bin", "trainyard"), kubeconfig: c.Kubeconfig(), repo: repo}
	name := tuneArgs[2]
	created := time.Now()
	defer func() {
		_ = f.show(context.Background(), "delete", "optimizationjob/"+name)
		for i := range 4 { // each trial's share of the runtime's host directory
			_ = os.RemoveAll(filepath.Join(c.ProcessHostPathRoot(), fmt.Sprintf("default_%s-trial-%d", name, i)))
		}
	}()
	err := f.show(ctx, tuneArgs...)
	_ = f.show(ctx, "get", "optimizationjob/"+name)
	out, gerr := f.cmd(ctx, "get", "optimizationjob/"+name, "-o", "json").Output()
	var shown struct {
		Job *trainer.OptimizationJob `json:"optimizationJob"`
	}
	if gerr == nil {
		gerr = json.Unmarshal(out, &shown)
	}
	elapsed := time.Since(created).Seconds()
	switch {
	case err != nil:
		fmt.Printf("==> OptimizationJob %s: %v (after %.1fs; make run took %.1fs)\n    component logs: %s\n", name, err, elapsed, time.Since(start).Seconds(), c.Logs())
		return 1
	case gerr != nil:
		return fail(gerr)
	case shown.Job == nil || shown.Job.Status == nil || shown.Job.Status.Result.TrainJobName == "":
		fmt.Printf("==> OptimizationJob %s finished without a best trial: no trial reported its loss\n", name)
		return 1
	}
	r := shown.Job.Status.Result
	var ps []string
	for _, p := range r.Parameters {
		ps = append(ps, p.Name+"="+p.Value)
	}
	fmt.Printf("==> Best trial %s: loss=%s with %s; %d trials in %.1fs; make run took %.1fs\n",
		r.TrainJobName, r.ObjectiveValue, strings.Join(ps, ", "), shown.Job.Status.TrialsFinished, elapsed, time.Since(start).Seconds())
	return 0
}
