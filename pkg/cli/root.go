package cli

// The command tree (cobra): the root with kubectl's connection flags, the
// commands, `completion`, and the names a kubectl plugin shows.

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/pkg/version"
)

// newRootCommand is `trainyard` with its commands, writing to e's outputs.
func newRootCommand(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "trainyard",
		Short: "Run distributed training on Kubernetes: TrainJobs on (Cluster)TrainingRuntimes",
		Long: `trainyard runs distributed training on Kubernetes: TrainJobs on (Cluster)TrainingRuntimes.

It is the Kubeflow SDK's TrainerClient flow from a shell: list the runtimes,
train a local script on N nodes, follow the job's status, steps and logs, wait
for it, delete it. It talks to any cluster that serves
trainer.kubeflow.org/v1alpha1 (Trainyard, or Kubeflow Trainer) with kubectl's
connection flags (--kubeconfig, --context, -n, --as, --token, ...), which go
anywhere on the line.`,
		Example: `  # The runtimes, then a script trained on 2 nodes, followed to its end
  trainyard runtimes
  job=$(trainyard train --num-nodes 2 --resources cpu=2,memory=4Gi train.py)
  trainyard logs -f $job
  trainyard wait $job && trainyard delete $job

  # In another namespace of another context
  trainyard get --context prod -n team-a`,
		Version:           version.Get().String(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
			}
			return usageError{fmt.Errorf("%s", msg)}
		},
		RunE: func(*cobra.Command, []string) error { return errNoCommand },
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// Our own --version, so that cobra does not take -v for it.
	root.Flags().Bool("version", false, "print the client's version and exit")
	root.SetVersionTemplate("{{.Version}}\n")
	e.kube.AddFlags(root.PersistentFlags())
	// The API clients keep no discovery cache: --cache-dir would do nothing.
	_ = root.PersistentFlags().MarkHidden("cache-dir")
	registerConnectionCompletions(e, root)
	root.AddCommand(runtimesCommand(e), trainCommand(e), optimizeCommand(e), getCommand(e), logsCommand(e), waitCommand(e),
		eventsCommand(e), deleteCommand(e), versionCommand(e), completionCommand(), optionsCommand())
	root.SetUsageFunc(writeUsage)
	if e.name != root.Name() {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: e.name}
		renameInHelp(root, e.name)
	}
	return root
}

// programRef is "trainyard" as a command in help: at the start of a line or
// after a space, "(", "`" or "$(".
var programRef = regexp.MustCompile("(^|[\\s(`])trainyard ")

// renameInHelp calls the program name in the help texts and examples of c and
// its commands, as a kubectl plugin is called.
func renameInHelp(c *cobra.Command, name string) {
	c.Long = programRef.ReplaceAllString(c.Long, "${1}"+name+" ")
	c.Example = programRef.ReplaceAllString(c.Example, "${1}"+name+" ")
	for _, sub := range c.Commands() {
		renameInHelp(sub, name)
	}
}

// completionCommand prints cobra's completion script for a shell.
func completionCommand() *cobra.Command {
	shells := []string{"bash", "zsh", "fish", "powershell"}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script for bash, zsh, fish or powershell",
		Long: `Print the shell completion script for bash, zsh, fish or powershell.

Loaded in a shell, it completes the commands and flags of trainyard, and the
names of the current namespace's jobs (of every kind) and runtimes, which it
asks the cluster for (with the connection flags already on the line). bash
needs the bash-completion package.

As a kubectl plugin (the binary named kubectl-trainyard on the PATH), kubectl
1.26 and later completes ` + "`kubectl trainyard ...`" + ` itself through
kubectl_complete-trainyard on the PATH: a link to the same binary, which make
build puts in bin/ next to kubectl-trainyard.`,
		Example: `  # bash, in this shell, then in every new one
  source <(trainyard completion bash)
  trainyard completion bash > ~/.local/share/bash-completion/completions/trainyard

  # zsh (compinit must be on)
  trainyard completion zsh > "${fpath[1]}/_trainyard"

  # fish
  trainyard completion fish > ~/.config/fish/completions/trainyard.fish`,
		ValidArgs:             shells,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("completion takes one shell (%s), got %q", strings.Join(shells, ", "), args)
			}
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return usagef("completion: unknown shell %q; want %s", args[0], strings.Join(shells, ", "))
		},
	}
}
