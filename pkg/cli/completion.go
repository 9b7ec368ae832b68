package cli

// Dynamic shell completion (cobra's __complete): the names of the namespace's
// jobs and runtimes, and of the kubeconfig's contexts and the cluster's
// namespaces, each asked for with the connection flags already on the line.

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// completionTimeout bounds what a completion asks the cluster: a shell waits
// for it.
const completionTimeout = 5 * time.Second

const noFiles = cobra.ShellCompDirectiveNoFileComp

// completionContext is the command's context, bounded by completionTimeout.
func completionContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, completionTimeout)
}

// matching keeps the completions that start with prefix, sorted, each once.
func matching(prefix string, names map[string]string) []cobra.Completion {
	var out []cobra.Completion
	for n, desc := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, cobra.CompletionWithDesc(n, desc))
		}
	}
	sort.Strings(out)
	return out
}

// completeRuntimeArg completes `runtimes NAME`.
func (e *env) completeRuntimeArg(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	return e.completeRuntimes(cmd, args, toComplete)
}

// completeRuntimes completes the names of the runtimes `train --runtime`
// finds: the namespace's TrainingRuntimes and the ClusterTrainingRuntimes.
func (e *env) completeRuntimes(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cl, err := e.connect()
	if err != nil {
		return nil, noFiles
	}
	ctx, cancel := completionContext(cmd)
	defer cancel()
	rts, _, _, err := ListRuntimes(ctx, cl.Client, cl.Namespace)
	if err != nil {
		return nil, noFiles
	}
	names := map[string]string{}
	for _, rt := range rts {
		if _, ok := names[rt.Name]; !ok { // the namespace's comes first and wins
			names[rt.Name] = rt.Kind + ", " + rt.Framework
		}
	}
	return matching(toComplete, names), noFiles
}

// completeJobs completes the names of the namespace's TrainJobs, and of its
// PyTorchJobs as pytorchjob/NAME (NAME with --kind pytorchjob); several of
// them when multi.
func (e *env) completeJobs(multi bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if !multi && len(args) > 0 {
			return nil, noFiles
		}
		cl, err := e.connect()
		if err != nil {
			return nil, noFiles
		}
		ctx, cancel := completionContext(cmd)
		defer cancel()
		kind, _ := cmd.Flags().GetString("kind")
		pyTorchOnly := kindNames[strings.ToLower(kind)] == kubeflowv1.PyTorchJobKind
		names := map[string]string{}
		if !pyTorchOnly {
			var list trainer.TrainJobList
			if err := cl.Client.List(ctx, &list, client.InNamespace(cl.Namespace)); err == nil {
				for _, j := range list.Items {
					names[j.Name] = "TrainJob " + string(j.Status.Phase)
				}
			}
		}
		if pyTorchOnly || strings.Contains(toComplete, "/") {
			var list kubeflowv1.PyTorchJobList
			if err := cl.Client.List(ctx, &list, client.InNamespace(cl.Namespace)); err == nil {
				for _, j := range list.Items {
					name := j.Name
					if !pyTorchOnly {
						name = "pytorchjob/" + name
					}
					names[name] = "PyTorchJob"
				}
			}
		}
		return matching(toComplete, names), noFiles
	}
}

// completeStatuses completes the last of wait --for's comma-separated statuses.
func completeStatuses(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	done, last := "", toComplete
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	names := map[string]string{}
	for _, s := range append(append([]string{}, Statuses...), PyTorchJobStatuses...) {
		if strings.HasPrefix(s, last) {
			names[done+s] = ""
		}
	}
	return matching(done+last, names), noFiles | cobra.ShellCompDirectiveNoSpace
}

// registerOutputCompletion completes -o.
func registerOutputCompletion(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{OutputYAML, OutputJSON}, noFiles))
}

// registerConnectionCompletions completes --context from the kubeconfig and
// -n from the cluster's namespaces.
func registerConnectionCompletions(e *env, root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		raw, err := e.kube.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, noFiles
		}
		names := map[string]string{}
		for n, c := range raw.Contexts {
			names[n] = c.Cluster
		}
		return matching(toComplete, names), noFiles
	})
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cl, err := e.connect()
		if err != nil || cl.Clientset == nil {
			return nil, noFiles
		}
		ctx, cancel := completionContext(cmd)
		defer cancel()
		list, err := cl.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, noFiles
		}
		names := map[string]string{}
		for _, ns := range list.Items {
			names[ns.Name] = ""
		}
		return matching(toComplete, names), noFiles
	})
}
