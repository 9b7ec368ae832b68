package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	OutputTable = ""
	OutputYAML  = "yaml"
	OutputJSON  = "json"
)

func checkOutput(o string) error {
	switch o {
	case OutputTable, OutputYAML, OutputJSON:
		return nil
	}
	return usageError{fmt.Errorf("-o %q: want yaml or json (default: a table)", o)}
}

// printData writes v as YAML or JSON.
func printData(w io.Writer, format string, v interface{}) error {
	switch format {
	case OutputJSON:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q", format)
}

// PrintRuntimes writes the runtimes as a table.
func PrintRuntimes(w io.Writer, rts []Runtime) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tFRAMEWORK\tNODES\tDEVICE\tDEVICE COUNT\tENTRYPOINT")
	for _, r := range rts {
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + r.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", name, r.Kind, r.Framework, r.NumNodes, r.Device, r.DeviceCount, r.Entrypoint)
	}
	return tw.Flush()
}
