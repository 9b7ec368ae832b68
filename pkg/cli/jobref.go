package cli

import (
	"strings"

	"github.com/spf13/cobra"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// The kinds of job that get, logs, wait and delete take: TrainJobs, and the
// legacy kubeflow.org/v1 PyTorchJobs that Trainyard (or Kubeflow's training
// operator) runs.

// JobRef names a job: its kind (trainer.TrainJobKind or
// kubeflowv1.PyTorchJobKind) and its name.
type JobRef struct {
	Kind, Name string
}

// String is KIND/NAME in lower case, as kubectl names objects.
func (r JobRef) String() string { return strings.ToLower(r.Kind) + "/" + r.Name }

// IsPyTorchJob reports whether the ref names a PyTorchJob.
func (r JobRef) IsPyTorchJob() bool { return r.Kind == kubeflowv1.PyTorchJobKind }

// kindNames maps what a command line may call a kind (kubectl's singular,
// plural and short names, any case) to the kind.
var kindNames = map[string]string{
	"trainjob": trainer.TrainJobKind, "trainjobs": trainer.TrainJobKind, "tj": trainer.TrainJobKind,
	"pytorchjob": kubeflowv1.PyTorchJobKind, "pytorchjobs": kubeflowv1.PyTorchJobKind,
}

// kindFlag is --kind: the kind of the jobs named without KIND/ (default
// TrainJob).
type kindFlag struct{ kind string }

func (k *kindFlag) addTo(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kind, "kind", "", "kind of the jobs named without KIND/: trainjob (default) or pytorchjob")
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]cobra.Completion{"trainjob", "pytorchjob"}, cobra.ShellCompDirectiveNoFileComp))
}

// parse resolves the flag: the kind, or TrainJob when it is not set.
func (k *kindFlag) parse() (string, error) {
	if k.kind == "" {
		return trainer.TrainJobKind, nil
	}
	kind, ok := kindNames[strings.ToLower(k.kind)]
	if !ok {
		return "", usagef("--kind %q: want trainjob or pytorchjob", k.kind)
	}
	return kind, nil
}

// set reports whether --kind was given.
func (k *kindFlag) set() bool { return k.kind != "" }

// ParseJobRef parses NAME (a job of kind def) or KIND/NAME, e.g.
// pytorchjob/mnist or trainjob/a1b2c3; KIND/ must agree with def when kindSet
// (--kind was given).
func ParseJobRef(arg, def string, kindSet bool) (JobRef, error) {
	prefix, name, ok := strings.Cut(arg, "/")
	if !ok {
		return JobRef{Kind: def, Name: arg}, nil
	}
	kind, known := kindNames[strings.ToLower(prefix)]
	switch {
	case !known:
		return JobRef{}, usagef("%q: unknown kind %q; want NAME, trainjob/NAME or pytorchjob/NAME", arg, prefix)
	case name == "" || strings.Contains(name, "/"):
		return JobRef{}, usagef("%q: want KIND/NAME with one name", arg)
	case kindSet && kind != def:
		return JobRef{}, usagef("%q is a %s, but --kind says %s", arg, kind, def)
	}
	return JobRef{Kind: kind, Name: name}, nil
}

// jobRefs parses the job arguments of a command with the --kind flag.
func (k *kindFlag) jobRefs(args []string) ([]JobRef, error) {
	def, err := k.parse()
	if err != nil {
		return nil, err
	}
	refs := make([]JobRef, 0, len(args))
	for _, a := range args {
		r, err := ParseJobRef(a, def, k.set())
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, nil
}
