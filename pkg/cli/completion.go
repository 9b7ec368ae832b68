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

// completeJobs completes the names of the namespace's jobs: those of the
// default kind (TrainJobs) as NAME, the other kinds' as KIND/NAME once the
// word has a "/" (with --kind, that kind's, as NAME); several of them when
// multi.
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
		names := map[string]string{}
		flag, _ := cmd.Flags().GetString("kind")
		if k, ok := e.kinds.named(flag); ok {
			for n, d := range k.Complete(ctx, cl.Client, cl.Namespace) {
				names[n] = d
			}
			return matching(toComplete, names), noFiles
		}
		for n, d := range e.kinds[0].Complete(ctx, cl.Client, cl.Namespace) {
			names[n] = d
		}
		if strings.Contains(toComplete, "/") {
			for _, k := range e.kinds[1:] {
				for n, d := range k.Complete(ctx, cl.Client, cl.Namespace) {
					names[k.Names()[0]+"/"+n] = d
				}
			}
		}
		return matching(toComplete, names), noFiles
	}
}

// completeStatuses completes the last of wait --for's comma-separated
// statuses: those of every kind.
func (e *env) completeStatuses(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	done, last := "", toComplete
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	names := map[string]string{}
	for _, k := range e.kinds {
		for _, s := range k.Wait().Statuses {
			if strings.HasPrefix(s, last) {
				names[done+s] = ""
			}
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
