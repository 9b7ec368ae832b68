package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/version"
)

// EnvSystemNamespace is where Kubeflow's SDK looks for the control plane's
// public ConfigMap (default kubeflow-system); `trainyard version` honours it
// too, so that both read the same one.
const EnvSystemNamespace = "KUBEFLOW_SYSTEM_NAMESPACE"

// Versions is what `trainyard version` shows: this CLI's build and what the
// cluster's public ConfigMap says of its control plane (nil when it could not
// be read).
type Versions struct {
	Client version.Info    `json:"client"`
	Server *ServerVersions `json:"server,omitempty"`
}

// ServerVersions are the versions of the cluster's control plane, from the
// public ConfigMap (pkg/version.ConfigMap).
type ServerVersions struct {
	// Trainyard is Trainyard's release; empty on a cluster that runs Kubeflow
	// Trainer, whose ConfigMap has only the Kubeflow Trainer version.
	Trainyard string `json:"trainyardVersion,omitempty"`
	// KubeflowTrainer is the Kubeflow Trainer release whose API the cluster
	// serves.
	KubeflowTrainer string `json:"kubeflowTrainerVersion,omitempty"`
	// ConfigMap is namespace/name of the ConfigMap.
	ConfigMap string `json:"configMap"`
}

// ServerVersion reads the control plane's versions from the public ConfigMap
// in the namespace.
func ServerVersion(ctx context.Context, c client.Client, namespace string) (*ServerVersions, error) {
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: namespace, Name: version.ConfigMapName}
	if err := c.Get(ctx, key, &cm); err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s: %w", key, err)
	}
	sv := &ServerVersions{Trainyard: cm.Data[version.TrainyardVersionKey], KubeflowTrainer: cm.Data[version.KubeflowTrainerVersionKey],
		ConfigMap: key.String()}
	if sv.Trainyard == "" && sv.KubeflowTrainer == "" {
		return nil, fmt.Errorf("ConfigMap %s has neither %s nor %s", key, version.TrainyardVersionKey, version.KubeflowTrainerVersionKey)
	}
	return sv, nil
}

// PrintVersions writes the versions as
//
//	Client: v0.1.0 (commit 1a2b3c4, built 2026-01-02T03:04:05Z, go1.26.1)
//	Server: v0.1.0 (Kubeflow Trainer API v2.4.0)
//
// with "Server: unknown" when it could not be read, and the Kubeflow Trainer
// version alone on a cluster that runs Kubeflow Trainer.
func PrintVersions(w io.Writer, v Versions) error {
	server := "unknown"
	switch s := v.Server; {
	case s == nil:
	case s.Trainyard == "":
		server = "Kubeflow Trainer " + s.KubeflowTrainer + " (not Trainyard)"
	case s.KubeflowTrainer == "":
		server = s.Trainyard
	default:
		server = fmt.Sprintf("%s (Kubeflow Trainer API %s)", s.Trainyard, s.KubeflowTrainer)
	}
	_, err := fmt.Fprintf(w, "Client: %s\nServer: %s\n", v.Client, server)
	return err
}

func versionCommand(e *env) *cobra.Command {
	var output, namespace string
	cmd := &cobra.Command{
		Use:   "version [--system-namespace NS] [-o yaml|json]",
		Short: "Print the version of this trainyard and of the cluster's Trainyard",
		Long: `Print the version of this trainyard and of the cluster's Trainyard.

The client's version is this binary's build. The server's comes from the
ConfigMap ` + version.ConfigMapName + ` that the manifests install in Trainyard's
namespace (Kubeflow Trainer publishes the same one, which Kubeflow's SDK reads):
its ` + version.TrainyardVersionKey + ` and ` + version.KubeflowTrainerVersionKey + `. When it cannot be read
(no cluster, no Trainyard, no permission), the server's version is unknown, the
reason is on stderr, and the exit code is still 0. ` + "`trainyard --version`" + ` prints
the client's version alone, as the other Trainyard binaries' --version do.`,
		Example: `  # This CLI's build and the cluster's Trainyard
  trainyard version

  # Both as JSON, Trainyard installed in another namespace
  trainyard version --system-namespace ml-system -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) > 0 {
				return usagef("version takes no arguments, got %q", args)
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			v := Versions{Client: version.Get()}
			cl, err := e.connect()
			if err == nil {
				v.Server, err = ServerVersion(ctx, cl.Client, namespace)
			}
			if err != nil {
				fmt.Fprintf(e.stderr, "warning: the server's version is unknown: %v\n", err)
			}
			if output != OutputTable {
				return printData(e.stdout, output, v)
			}
			return PrintVersions(e.stdout, v)
		},
	}
	def := os.Getenv(EnvSystemNamespace)
	if def == "" {
		def = version.DefaultNamespace
	}
	cmd.Flags().StringVar(&namespace, "system-namespace", def, "namespace of Trainyard, where its ConfigMap "+version.ConfigMapName+" is; $"+EnvSystemNamespace+" when set")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: text)")
	registerOutputCompletion(cmd)
	return cmd
}
