package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/pkg/cli/view"
	"github.com/trainyard/trainyard/pkg/controller"
)

// The kinds of job that get, logs, wait, delete and events take: those of the
// manager's one list of kinds (pkg/controller.Kinds), each through its CLI
// view. The first is the default: a bare NAME is one of its jobs (a TrainJob).

// Kinds are the CLI views of the job kinds, the default first.
func Kinds() []view.Kind {
	var out []view.Kind
	for _, k := range controller.Kinds() {
		if p, ok := k.(view.Provider); ok {
			out = append(out, p.View())
		}
	}
	return out
}

// kindTable finds a kind by what a command line calls it.
type kindTable []view.Kind

// named returns the kind a command line calls name (kubectl's singular,
// plural and short names, any case).
func (t kindTable) named(name string) (view.Kind, bool) {
	for _, k := range t {
		for _, n := range k.Names() {
			if strings.EqualFold(n, name) {
				return k, true
			}
		}
	}
	return nil, false
}

// byKind returns the kind of an API kind name (TrainJob).
func (t kindTable) byKind(kind string) view.Kind {
	for _, k := range t {
		if k.Kind() == kind {
			return k
		}
	}
	return nil
}

// flagNames are the kinds' canonical names, as --kind takes them.
func (t kindTable) flagNames() []string {
	out := make([]string, 0, len(t))
	for _, k := range t {
		out = append(out, k.Names()[0])
	}
	return out
}

// want is "trainjob or pytorchjob".
func (t kindTable) want() string { return orList(t.flagNames()) }

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// JobRef names a job: its kind and its name.
type JobRef struct {
	Kind view.Kind
	Name string
}

// String is KIND/NAME in lower case, as kubectl names objects.
func (r JobRef) String() string { return strings.ToLower(r.Kind.Kind()) + "/" + r.Name }

// kindFlag is --kind: the kind of the jobs named without KIND/ (default: the
// first kind, TrainJob).
type kindFlag struct {
	kinds kindTable
	kind  string
}

func (k *kindFlag) addTo(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kind, "kind", "", "kind of the jobs named without KIND/: "+k.kinds.want()+" (default "+k.kinds.flagNames()[0]+")")
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(k.kinds.flagNames(), cobra.ShellCompDirectiveNoFileComp))
}

// parse resolves the flag: the kind, or the default kind when it is not set.
func (k *kindFlag) parse() (view.Kind, error) {
	if k.kind == "" {
		return k.kinds[0], nil
	}
	kind, ok := k.kinds.named(k.kind)
	if !ok {
		return nil, usagef("--kind %q: want %s", k.kind, k.kinds.want())
	}
	return kind, nil
}

// set reports whether --kind was given.
func (k *kindFlag) set() bool { return k.kind != "" }

// parseRef parses NAME (a job of kind def) or KIND/NAME, e.g.
// pytorchjob/mnist or trainjob/a1b2c3; KIND/ must agree with def when kindSet
// (--kind was given).
func (t kindTable) parseRef(arg string, def view.Kind, kindSet bool) (JobRef, error) {
	prefix, name, ok := strings.Cut(arg, "/")
	if !ok {
		return JobRef{Kind: def, Name: arg}, nil
	}
	kind, known := t.named(prefix)
	switch {
	case !known:
		forms := []string{"NAME"}
		for _, n := range t.flagNames() {
			forms = append(forms, n+"/NAME")
		}
		return JobRef{}, usagef("%q: unknown kind %q; want %s", arg, prefix, orList(forms))
	case name == "" || strings.Contains(name, "/"):
		return JobRef{}, usagef("%q: want KIND/NAME with one name", arg)
	case kindSet && kind != def:
		return JobRef{}, usagef("%q is a %s, but --kind says %s", arg, kind.Kind(), def.Kind())
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
		r, err := k.kinds.parseRef(a, def, k.set())
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, nil
}
