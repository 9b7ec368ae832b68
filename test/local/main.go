// Command local runs Trainyard's main flow on this machine with no cluster: a
// real etcd and kube-apiserver (built from Go modules), Trainyard's and JobSet's
// CRDs, the Trainyard manager, the torch-distributed runtime and the example
// TrainJob. It prints the JobSet that Trainyard renders and the TrainJob's
// status. Pods do not run here: that needs the JobSet and Job controllers, a
// scheduler and nodes (the local cluster).
//
// Usage: go run ./test/local [-keep]   (or: make run)
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

func main() {
	keep := flag.Bool("keep", false, "keep the API server running (and print a kubeconfig) until Ctrl-C")
	flag.Parse()
	if err := run(*keep); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(keep bool) error {
	fmt.Println("Starting etcd, kube-apiserver (+ garbage collector) from bin/k8s ...")
	env, err := framework.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	if err := env.StartManager(framework.ManagerOptions{}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := framework.RepoRoot()
	for _, f := range []string{"runtimes/torch-distributed.yaml", "examples/trainjob-torch.yaml"} {
		if err := apply(ctx, env.Client, filepath.Join(root, f)); err != nil {
			return err
		}
		fmt.Println("applied", f)
	}

	key := client.ObjectKey{Namespace: "default", Name: "torch-allreduce"}
	var js jobsetv1alpha2.JobSet
	for {
		if err := env.Client.Get(ctx, key, &js); err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no JobSet for TrainJob %s after 2 minutes", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let the status write land
	var job trainer.TrainJob
	if err := env.Client.Get(ctx, key, &job); err != nil {
		return err
	}

	fmt.Printf("\nTrainJob %s: phase=%s\n", key, job.Status.Phase)
	for _, c := range job.Status.Conditions {
		fmt.Printf("  condition %-9s %-5s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	fmt.Printf("\nJobSet %s (owned by the TrainJob):\n", js.Name)
	for _, rj := range js.Spec.ReplicatedJobs {
		fmt.Printf("  replicatedJob %q: %d pod(s) %s-%s-0-{0..%d}\n", rj.Name, *rj.Template.Spec.Parallelism,
			js.Name, rj.Name, *rj.Template.Spec.Parallelism-1)
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			fmt.Printf("    container %q image %s\n", c.Name, c.Image)
			for _, e := range c.Env {
				fmt.Printf("      %s=%s\n", e.Name, envValue(e))
			}
		}
	}
	if !keep {
		fmt.Println("\nDone. (Pods run once the local cluster exists; this run shows the API and the rendering.)")
		return nil
	}
	user, err := env.KubeConfig()
	if err != nil {
		return err
	}
	kc := filepath.Join(root, "bin", "local.kubeconfig")
	if err := os.WriteFile(kc, user, 0o600); err != nil {
		return err
	}
	fmt.Printf("\nAPI server kept running. Try:\n  kubectl --kubeconfig %s get trainjobs,jobsets -A\nCtrl-C stops it.\n", kc)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}

func envValue(e corev1.EnvVar) string {
	if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
		return "<from " + e.ValueFrom.FieldRef.FieldPath + ">"
	}
	return e.Value
}

func apply(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if !strings.HasPrefix(u.GetKind(), "Cluster") && u.GetNamespace() == "" {
			u.SetNamespace("default")
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}
