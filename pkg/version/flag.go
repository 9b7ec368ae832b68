package version

import (
	"fmt"
	"io"
)

// FlagName is the flag with which every Trainyard binary prints its identity
// and exits 0: trainyard-manager --version, trainyard-node --version, ...
const FlagName = "version"

// FlagSet is what RegisterFlag needs of a flag set. The standard library's
// *flag.FlagSet and pflag's *pflag.FlagSet (cobra's) both have it.
type FlagSet interface {
	BoolVar(p *bool, name string, value bool, usage string)
}

// Flag is a binary's --version, registered with RegisterFlag.
type Flag struct {
	requested bool
}

// RegisterFlag adds --version to fs. After parsing, the binary calls
// Handled and, when it reports true, exits 0 without doing anything else:
//
//	ver := version.RegisterFlag(flag.CommandLine)
//	flag.Parse()
//	if ver.Handled(os.Stdout) {
//		return
//	}
func RegisterFlag(fs FlagSet) *Flag {
	f := &Flag{}
	fs.BoolVar(&f.requested, FlagName, false, "print the version and exit")
	return f
}

// Handled prints this binary's identity (Get) on one line to w when --version
// was given, and reports whether it was. The version comes first, alone in its
// field, so that scripts (and the local cluster, pkg/localcluster/version.go) take
// it without parsing the rest, e.g.
// "v0.1.0 (commit 1a2b3c4d5e6f, built 2026-01-02T03:04:05Z, go1.26.1)".
func (f *Flag) Handled(w io.Writer) bool {
	if !f.requested {
		return false
	}
	_, _ = fmt.Fprintln(w, Get())
	return true
}
