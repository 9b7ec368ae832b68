package cli

// `trainyard optimize`: an OptimizationJob (trainer.kubeflow.org/v1alpha1)
// from flags, as `train` makes a TrainJob, or from a YAML file; then the
// table of its trials (through the OptimizationJob kind's CLI view) until
// every trial finished, and the best trial.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/view"
)

// ParseParam reads --param NAME=SPACE: uniform:MIN:MAX, int:MIN:MAX
// (uniform whole numbers), loguniform:MIN:MAX, logint:MIN:MAX, or
// categorical:A,B,C.
func ParseParam(s string) (trainer.Parameter, error) {
	name, space, ok := strings.Cut(s, "=")
	kind, args, ok2 := strings.Cut(space, ":")
	if !ok || !ok2 || name == "" {
		return trainer.Parameter{}, fmt.Errorf("--param %q: want NAME=uniform:MIN:MAX, int:MIN:MAX, loguniform:MIN:MAX, logint:MIN:MAX or categorical:A,B,C", s)
	}
	p := trainer.Parameter{Name: name, SearchSpace: &trainer.SearchSpace{}}
	if kind == "categorical" {
		p.SearchSpace.Categorical.Choices = strings.Split(args, ",")
		return p, nil
	}
	lo, hi, ok := strings.Cut(args, ":")
	if !ok || lo == "" || hi == "" {
		return trainer.Parameter{}, fmt.Errorf("--param %q: %s wants MIN:MAX", s, kind)
	}
	switch kind {
	case "uniform", "int":
		p.SearchSpace.Uniform = trainer.UniformSpace{Min: trainer.Double(lo), Max: trainer.Double(hi), Type: trainer.ParameterTypeFloat}
		if kind == "int" {
			p.SearchSpace.Uniform.Type = trainer.ParameterTypeInt
		}
	case "loguniform", "logint":
		p.SearchSpace.LogUniform = trainer.LogUniformSpace{Min: trainer.Double(lo), Max: trainer.Double(hi), Type: trainer.ParameterTypeFloat}
		if kind == "logint" {
			p.SearchSpace.LogUniform.Type = trainer.ParameterTypeInt
		}
	default:
		return trainer.Parameter{}, fmt.Errorf("--param %q: unknown space %q; want uniform, int, loguniform, logint or categorical", s, kind)
	}
	return p, nil
}

// OptimizeOptions describe the OptimizationJob that `optimize` makes from flags.
type OptimizeOptions struct {
	// Trial is the TrainJob every trial runs (NewTrainJob's).
	Trial            *trainer.TrainJob
	Name, Namespace  string
	Metric           string
	Maximize, Grid   bool
	Seed             *int64
	Trials, Parallel int32
	Parameters       []trainer.Parameter
}

// NewOptimizationJob builds the OptimizationJob of o.
func NewOptimizationJob(o OptimizeOptions) *trainer.OptimizationJob {
	dir := trainer.ObjectiveDirectionMinimize
	if o.Maximize {
		dir = trainer.ObjectiveDirectionMaximize
	}
	algo := &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: o.Seed}}
	if o.Grid {
		algo = &trainer.SearchAlgorithm{Grid: &trainer.GridAlgorithm{}}
	}
	return &trainer.OptimizationJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.OptimizationJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
		Spec: trainer.OptimizationJobSpec{
			Objectives:      []trainer.Objective{{Metric: o.Metric, Direction: dir}},
			SearchAlgorithm: algo,
			Parameters:      o.Parameters,
			NumTrials:       o.Trials,
			ParallelTrials:  o.Parallel,
			TrainJobTemplate: trainer.TrainJobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: o.Trial.Labels},
				Spec:       o.Trial.Spec,
			},
		},
	}
}

func optimizeCommand(e *env) *cobra.Command {
	var (
		file, runtimeName, resources, queue, name, image, metric string
		numNodes, trials, parallel                               int32
		seed                                                     int64
		envs, params                                             []string
		maximize, grid, dryRun, noWatch                          bool
		interval, timeout                                        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "optimize [flags] --param NAME=SPACE... SCRIPT [-- SCRIPT_ARGS...] | -f FILE",
		Short: "Search hyperparameters: an OptimizationJob whose trials are TrainJobs, watched to its best trial",
		Long: `Search hyperparameters: create an OptimizationJob (trainer.kubeflow.org/v1alpha1)
whose trials are TrainJobs, then show the table of its trials (parameters,
state, objective) whenever it changes until every trial finished, and the best
trial.

From flags, each trial is the TrainJob ` + "`trainyard train`" + ` would make of the same
flags and SCRIPT, and gets each parameter as the environment variable
KUBEFLOW_TRAINER_OPT_<NAME> (upper case); the script reports its objective
metric through the status server (the Kubeflow SDK's update_trainjob_status, or
a POST of {"trainerStatus":{"metrics":[{"name":"loss","value":"0.3"}]}} to
$KUBEFLOW_TRAINER_SERVER_URL). A --param is NAME=uniform:MIN:MAX, int:MIN:MAX,
loguniform:MIN:MAX, logint:MIN:MAX or categorical:A,B,C. With -f, the
OptimizationJob of the file is created as it is (in the namespace of -n).

Prints the OptimizationJob's name on stderr, the table on stdout, and at the end
the best trial; exits 1 when every trial failed.`,
		Example: `  # 4 trials, 2 at a time: learning rate on a log scale and batch size
  trainyard optimize --metric loss --trials 4 --parallel 2 --seed 1 \
    --param lr=loguniform:0.0001:0.1 --param batch_size=categorical:32,64,128 train.py

  # Every combination of two choices, the largest accuracy
  trainyard optimize --grid --maximize --metric accuracy \
    --param opt=categorical:sgd,adam --param bs=categorical:32,64 train.py

  # From a file, without watching
  trainyard optimize -f examples/fashion-mnist-tuning/optimizationjob.yaml --no-watch`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, fs := cmd.Context(), cmd.Flags()
			var job *trainer.OptimizationJob
			cl, err := e.connect()
			if err != nil {
				return err
			}
			if file != "" {
				if len(args) > 0 || len(params) > 0 {
					return usagef("-f takes no SCRIPT and no --param: the file says everything")
				}
				data, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("reading %s: %w", file, err)
				}
				job = &trainer.OptimizationJob{}
				if err := yaml.UnmarshalStrict(data, job); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				if job.Kind != trainer.OptimizationJobKind {
					return usagef("%s holds a %q, not an OptimizationJob", file, job.Kind)
				}
				job.Namespace = cl.Namespace
				if name != "" {
					job.Name = name
				}
			} else {
				if len(params) == 0 {
					return usagef("no --param: say what to search, e.g. --param lr=loguniform:0.0001:0.1")
				}
				var ps []trainer.Parameter
				for _, s := range params {
					p, err := ParseParam(s)
					if err != nil {
						return usageError{err}
					}
					ps = append(ps, p)
				}
				res, err := ParseResources(resources)
				if err != nil {
					return usageError{err}
				}
				envVars, err := ParseEnv(envs)
				if err != nil {
					return usageError{err}
				}
				rt, err := GetRuntime(ctx, cl.Client, cl.Namespace, runtimeName)
				if err != nil {
					return err
				}
				command, err := commandOf(fs.ArgsLenAtDash(), args, func(script string, scriptArgs []string) ([]string, error) {
					content, err := os.ReadFile(script)
					if err != nil {
						return nil, fmt.Errorf("reading the script: %w", err)
					}
					return ScriptCommand(rt.Entrypoint, script, content, scriptArgs)
				})
				if err != nil {
					return err
				}
				if name == "" {
					if name, err = RandomName(); err != nil {
						return err
					}
				}
				tj := NewTrainJob(TrainOptions{Runtime: rt, NumNodes: numNodes, Resources: res, Env: envVars, Queue: queue, Image: image, Command: command})
				o := OptimizeOptions{Trial: tj, Name: name, Namespace: cl.Namespace, Metric: metric, Maximize: maximize, Grid: grid,
					Trials: trials, Parallel: parallel, Parameters: ps}
				if fs.Changed("seed") {
					o.Seed = ptr.To(seed)
				}
				job = NewOptimizationJob(o)
			}
			if dryRun {
				b, err := yaml.Marshal(job)
				if err != nil {
					return fmt.Errorf("encoding the OptimizationJob: %w", err)
				}
				_, err = e.stdout.Write(b)
				return err
			}
			if err := cl.Client.Create(ctx, job); err != nil {
				return fmt.Errorf("creating OptimizationJob %s/%s: %w", cl.Namespace, job.Name, err)
			}
			fmt.Fprintf(e.stderr, "OptimizationJob %s created in namespace %s; see it with: %s get optimizationjob/%s\n", job.Name, cl.Namespace, e.name, job.Name)
			if noWatch {
				fmt.Fprintln(e.stdout, job.Name)
				return nil
			}
			k, ok := e.kinds.named(trainer.OptimizationJobKind)
			if !ok {
				return fmt.Errorf("this trainyard knows no OptimizationJob kind")
			}
			return watchOptimization(ctx, e, cl, k, job.Name, interval, timeout)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&file, "filename", "f", "", "an OptimizationJob YAML file to create as it is")
	fs.StringArrayVar(&params, "param", nil, "NAME=SPACE hyperparameter to search (repeatable): uniform:MIN:MAX, int:MIN:MAX, loguniform:MIN:MAX, logint:MIN:MAX, categorical:A,B,...")
	fs.StringVar(&metric, "metric", "loss", "the objective: the metric the trials report")
	fs.BoolVar(&maximize, "maximize", false, "the best trial has the largest metric (default: the smallest)")
	fs.Int32Var(&trials, "trials", 4, "number of trials (numTrials)")
	fs.Int32Var(&parallel, "parallel", 1, "trials at a time (parallelTrials)")
	fs.Int64Var(&seed, "seed", 0, "random search seed: the same seed, the same trials (default: from the OptimizationJob's UID)")
	fs.BoolVar(&grid, "grid", false, "grid search: every combination of the (categorical) parameters, in order, up to --trials")
	fs.StringVar(&runtimeName, "runtime", DefaultRuntime, "the TrainingRuntime (this namespace) or ClusterTrainingRuntime each trial runs on")
	fs.Int32Var(&numNodes, "num-nodes", 0, "nodes per trial (default: the runtime's)")
	fs.StringVar(&resources, "resources", "", "resources per node of each trial, requests = limits, e.g. cpu=2,memory=4Gi")
	fs.StringArrayVar(&envs, "env", nil, "NAME=VALUE environment variable of every trial's trainer (repeatable)")
	fs.StringVar(&queue, "queue", "", "Kueue LocalQueue of every trial (label "+QueueLabel+")")
	fs.StringVar(&name, "name", "", "OptimizationJob name (default: random, 12 characters)")
	fs.StringVar(&image, "image", "", "trainer image (default: the runtime's)")
	fs.BoolVar(&dryRun, "dry-run", false, "print the OptimizationJob as YAML instead of creating it")
	fs.BoolVar(&noWatch, "no-watch", false, "print the name and return once it is created")
	fs.DurationVar(&interval, "interval", 2*time.Second, "how often to look at the trials")
	fs.DurationVar(&timeout, "timeout", 24*time.Hour, "how long to watch")
	_ = cmd.RegisterFlagCompletionFunc("runtime", e.completeRuntimes)
	return cmd
}

// commandOf is the trainer's command from the arguments, as `train` reads
// them: SCRIPT [-- ARGS] (script makes the command), or -- COMMAND, or
// neither (nil: the runtime's).
func commandOf(dash int, args []string, script func(string, []string) ([]string, error)) ([]string, error) {
	switch {
	case dash == 0:
		if len(args) == 0 {
			return nil, usagef("no command after --")
		}
		return args, nil
	case dash > 1:
		return nil, usagef("one SCRIPT expected before --, got %q (script arguments go after --)", args[:dash])
	case dash < 0 && len(args) > 1:
		return nil, usagef("one SCRIPT expected, got %q (script arguments go after --)", args)
	case len(args) > 0:
		return script(args[0], args[1:])
	}
	return nil, nil
}

// watchOptimization prints the job and its trials (the kind's view) each
// time they change, until it finished; then the best trial.
func watchOptimization(ctx context.Context, e *env, cl *Clients, k view.Kind, name string, interval, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := ""
	wait := k.Wait()
	for {
		shown, err := k.Get(ctx, cl.Client, cl.Namespace, name)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := shown.Print(&b, time.Now()); err != nil {
			return err
		}
		// The table without the age line, which changes every second.
		text := dropLine(b.String(), "Age:")
		if text != last {
			fmt.Fprintf(e.stdout, "%s\n", text)
			last = text
		}
		st, err := wait.Look(ctx, cl.Client, cl.Namespace, name)
		if err != nil {
			return err
		}
		if f := st.Finished; f != nil {
			if f.Status == wait.Failed {
				return &JobFailedError{Kind: trainer.OptimizationJobKind, Name: name, Reason: f.Reason, Message: f.Message}
			}
			fmt.Fprintf(e.stdout, "%s: %s\n", f.Status, f.Message)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("OptimizationJob %s not finished after %s: %w", name, timeout, ErrTimeout)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("watching OptimizationJob %s", name), ctx.Err())
		case <-time.After(interval):
		}
	}
}

// dropLine removes the lines that start with prefix.
func dropLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}
