package cli

// Usage text, kubectl's way: a command's own flags, and the connection flags,
// which every command takes, once in `trainyard options`.

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// connectionHint names the connection flags a usage text leaves out.
const connectionHint = "kubectl's --kubeconfig, --context, -n, --as, --token, --server, ..."

// writeUsage is the usage of c: its use line, examples, commands and own flags.
func writeUsage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:\n")
	if c.Runnable() && c.HasParent() {
		fmt.Fprintf(&b, "  %s\n", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "  %s COMMAND [flags]\n", c.CommandPath())
	}
	if c.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", c.Example)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n")
		var shown []*cobra.Command
		width := 0
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				shown = append(shown, sub)
				width = max(width, len(sub.Name()))
			}
		}
		for _, sub := range shown {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, sub.Name(), sub.Short)
		}
	}
	own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			own.AddFlag(f)
		}
	})
	if own.HasFlags() {
		fmt.Fprintf(&b, "\nFlags:\n%s", own.FlagUsages())
	}
	root := c.Root().CommandPath()
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nUse \"%s COMMAND --help\" for more about a command.", c.CommandPath())
	}
	fmt.Fprintf(&b, "\nUse \"%s options\" for the connection flags that every command takes (%s).\n", root, connectionHint)
	_, err := fmt.Fprint(c.OutOrStderr(), b.String())
	return err
}

// optionsCommand prints the connection flags.
func optionsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "Print the connection flags that every command takes",
		Long: `Print the connection flags that every command takes.

They are kubectl's (k8s.io/cli-runtime), with kubectl's meaning and defaults:
the kubeconfig ($KUBECONFIG, else ~/.kube/config, else the pod's service
account in a cluster), its context, the namespace (else the context's, else
default) and what overrides the context's cluster and user. They go anywhere on
the line.`,
		Example: `  # Another kubeconfig, context and namespace
  trainyard get --kubeconfig ~/.kube/prod --context ml -n team-a

  # Impersonating a user of a group, with a 10s limit on each request
  trainyard get --as alice --as-group ml-users --request-timeout 10s`,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("options takes no arguments, got %q", args)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "The connection flags, which every command takes (anywhere on the line):\n%s",
				cmd.Root().PersistentFlags().FlagUsages())
			return err
		},
	}
}
