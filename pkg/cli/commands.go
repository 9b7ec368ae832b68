package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/view"
)

// DefaultRuntime is the runtime `train` uses unless told otherwise, as in the SDK.
const DefaultRuntime = "torch-distributed"

func runtimesCommand(e *env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "runtimes [NAME] [-o yaml|json]",
		Short: "List the runtimes a TrainJob can use (or show one), with framework, nodes and devices",
		Long: `List the runtimes a TrainJob can use (or show one), with framework, nodes and devices.

Lists the namespace's TrainingRuntimes and the ClusterTrainingRuntimes that carry
the trainer.kubeflow.org/framework label (others are named on stderr, as the SDK
skips them). With NAME, shows that runtime as ` + "`trainyard train --runtime NAME`" + ` finds
it: the namespace's TrainingRuntime of that name, else the ClusterTrainingRuntime. DEVICE and DEVICE COUNT come from the limits of the runtime's node
container (nvidia.com/gpu → gpu, google.com/tpu → tpu, nvidia.com/mig-* → mig-*,
cpu → cpu; Unknown without limits), the count for all nodes together.
ENTRYPOINT is what runs a script given to ` + "`trainyard train`" + `.`,
		Example: `  # The runtimes of the current namespace and the cluster's
  trainyard runtimes

  # One runtime, as train --runtime finds it, as YAML
  trainyard runtimes torch-distributed -o yaml

  # Another namespace's
  trainyard runtimes -n team-a`,
		ValidArgsFunction: e.completeRuntimeArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) > 1 {
				return usagef("runtimes takes at most one runtime name, got %q", args)
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				rt, err := GetRuntime(ctx, cl.Client, cl.Namespace, args[0])
				if err != nil {
					return err
				}
				if rt.Framework == "" {
					fmt.Fprintf(e.stderr, "warning: %s %s has no %s label; the SDK does not list it\n", rt.Kind, rt.Name, trainer.FrameworkLabel)
				}
				if output != OutputTable {
					return printData(e.stdout, output, rt)
				}
				return PrintRuntimes(e.stdout, []Runtime{rt})
			}
			rts, skipped, warnings, err := ListRuntimes(ctx, cl.Client, cl.Namespace)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(e.stderr, "warning:", w)
			}
			for _, s := range skipped {
				fmt.Fprintf(e.stderr, "warning: %s has no %s label; not listed\n", s, trainer.FrameworkLabel)
			}
			if output != OutputTable {
				if rts == nil {
					rts = []Runtime{}
				}
				return printData(e.stdout, output, rts)
			}
			return PrintRuntimes(e.stdout, rts)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: a table)")
	registerOutputCompletion(cmd)
	return cmd
}

func trainCommand(e *env) *cobra.Command {
	var (
		runtimeName, resources, queue, name, image string
		numNodes                                   int32
		deadline                                   int64
		envs                                       []string
		dryRun                                     bool
	)
	cmd := &cobra.Command{
		Use:   "train [flags] SCRIPT [-- SCRIPT_ARGS...] | [flags] -- COMMAND [ARGS...]",
		Short: "Create a TrainJob that runs a local script (or a command) on N nodes",
		Long: `Create a TrainJob that runs a local script (or a command) on N nodes.

With SCRIPT, the file's content travels in the TrainJob's command: each node
writes it to a temporary directory and runs it with torchrun on torch runtimes
(torchrun reads the PET_* variables Trainyard sets, so it needs no flags) or
python3 on others, with SCRIPT_ARGS. After --, COMMAND is the trainer's command
as it is. With neither, the runtime's own command runs.

Prints the TrainJob's name on stdout, and on stderr how to follow it.`,
		Example: `  # A script on 2 nodes of 2 CPUs and 4Gi each (torchrun on torch runtimes)
  trainyard train --num-nodes 2 --resources cpu=2,memory=4Gi examples/mnist/mnist.py

  # Arguments for the script after --, an environment variable for the trainer
  trainyard train --env MNIST_STEPS=100 train.py -- --lr 0.1

  # A command instead of a script, on another runtime
  trainyard train --runtime plain-ml -- python3 -c 'print("hello")'

  # The TrainJob as YAML, created nowhere
  trainyard train --dry-run --name hello --queue team-a train.py

  # Keep the name to follow the job
  job=$(trainyard train train.py) && trainyard logs -f $job`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, fs := cmd.Context(), cmd.Flags()
			if numNodes < 0 {
				return usagef("--num-nodes %d: must be positive", numNodes)
			}
			if deadline < 0 {
				return usagef("--active-deadline-seconds %d: must be positive", deadline)
			}
			res, err := ParseResources(resources)
			if err != nil {
				return usageError{err}
			}
			envVars, err := ParseEnv(envs)
			if err != nil {
				return usageError{err}
			}
			script, scriptArgs, command := "", []string(nil), []string(nil)
			switch dash := fs.ArgsLenAtDash(); {
			case dash == 0:
				if len(args) == 0 {
					return usagef("no command after --")
				}
				command = args
			case dash > 1:
				return usagef("one SCRIPT expected before --, got %q (script arguments go after --)", args[:dash])
			case dash < 0 && len(args) > 1:
				return usagef("one SCRIPT expected, got %q (script arguments go after --)", args)
			case len(args) > 0:
				script, scriptArgs = args[0], args[1:]
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			rt, err := GetRuntime(ctx, cl.Client, cl.Namespace, runtimeName)
			if err != nil {
				return err
			}
			if rt.Framework == "" {
				fmt.Fprintf(e.stderr, "warning: %s %s has no %s label\n", rt.Kind, rt.Name, trainer.FrameworkLabel)
			}
			if script != "" {
				content, err := os.ReadFile(script)
				if err != nil {
					return fmt.Errorf("reading the script: %w", err)
				}
				if command, err = ScriptCommand(rt.Entrypoint, script, content, scriptArgs); err != nil {
					return err
				}
			}
			if name == "" {
				if name, err = RandomName(); err != nil {
					return err
				}
			}
			job := NewTrainJob(TrainOptions{Name: name, Namespace: cl.Namespace, Runtime: rt, NumNodes: numNodes,
				Resources: res, Env: envVars, Queue: queue, Image: image, Command: command, ActiveDeadlineSeconds: deadline})
			if dryRun {
				b, err := yaml.Marshal(job)
				if err != nil {
					return fmt.Errorf("encoding the TrainJob: %w", err)
				}
				_, err = e.stdout.Write(b)
				return err
			}
			if err := cl.Client.Create(ctx, job); err != nil {
				return fmt.Errorf("creating TrainJob %s/%s: %w", cl.Namespace, name, err)
			}
			fmt.Fprintln(e.stdout, name)
			nsFlag := ""
			if e.namespaceFlag() != "" {
				nsFlag = " -n " + cl.Namespace
			}
			fmt.Fprintf(e.stderr, "TrainJob %s created in namespace %s on %s %s; follow it with: %s%s logs -f %s\n",
				name, cl.Namespace, rt.Kind, rt.Name, e.name, nsFlag, name)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&runtimeName, "runtime", DefaultRuntime, "the TrainingRuntime (this namespace) or ClusterTrainingRuntime to run on")
	fs.Int32Var(&numNodes, "num-nodes", 0, "number of nodes (default: the runtime's)")
	fs.StringVar(&resources, "resources", "", "resources per node, requests = limits, e.g. cpu=2,memory=4Gi,gpu=1 (gpu is nvidia.com/gpu)")
	fs.StringArrayVar(&envs, "env", nil, "NAME=VALUE environment variable of the trainer (repeatable)")
	fs.StringVar(&queue, "queue", "", "Kueue LocalQueue (label "+QueueLabel+")")
	fs.StringVar(&name, "name", "", "TrainJob name (default: random, 12 characters)")
	fs.StringVar(&image, "image", "", "trainer image (default: the runtime's)")
	fs.Int64Var(&deadline, "active-deadline-seconds", 0, "fail the TrainJob (DeadlineExceeded) once it has run this long (spec.activeDeadlineSeconds; default: none)")
	fs.BoolVar(&dryRun, "dry-run", false, "print the TrainJob as YAML instead of creating it")
	_ = cmd.RegisterFlagCompletionFunc("runtime", e.completeRuntimes)
	return cmd
}

func getCommand(e *env) *cobra.Command {
	var output, runtimeName string
	kind := kindFlag{kinds: e.kinds}
	long, example := e.kinds.help("get")
	cmd := &cobra.Command{
		Use:   "get [[KIND/]NAME | --runtime RUNTIME | --kind KIND] [-o yaml|json]",
		Short: "Show a job's status and steps (its pods), or list the namespace's jobs",
		Long: `Show a job's status and steps (its pods), or list the namespace's jobs (by
default its ` + e.kinds[0].Kind() + `s; --kind ` + e.kinds.want() + `).

` + long,
		Example:           example,
		ValidArgsFunction: e.completeJobs(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) > 1 {
				return usagef("get takes at most one job name, got %q", args)
			}
			if len(args) == 1 && runtimeName != "" {
				return usagef("--runtime filters the list of jobs; it does not go with a job name")
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			refs, err := kind.jobRefs(args)
			if err != nil {
				return err
			}
			listKind, err := kind.parse()
			if err != nil {
				return err
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			var shown view.Shown
			if len(refs) == 1 {
				shown, err = refs[0].Kind.Get(ctx, cl.Client, cl.Namespace, refs[0].Name)
			} else {
				shown, err = listKind.List(ctx, cl.Client, cl.Namespace, runtimeName)
			}
			if err != nil {
				return err
			}
			if output != OutputTable {
				return printData(e.stdout, output, shown.Data)
			}
			if shown.Count == 0 {
				if runtimeName != "" {
					fmt.Fprintf(e.stderr, "no %ss on runtime %s in namespace %s\n", listKind.Kind(), runtimeName, cl.Namespace)
					return nil
				}
				fmt.Fprintf(e.stderr, "no %ss in namespace %s\n", listKind.Kind(), cl.Namespace)
				return nil
			}
			return shown.Print(e.stdout, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: text)")
	cmd.Flags().StringVar(&runtimeName, "runtime", "", "list only the jobs on this runtime")
	kind.addTo(cmd)
	registerOutputCompletion(cmd)
	_ = cmd.RegisterFlagCompletionFunc("runtime", e.completeRuntimes)
	return cmd
}
