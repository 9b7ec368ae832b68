// Command chartkinds writes the Helm chart's files/kinds.yaml from the job
// kinds (jobframework.ChartKinds of pkg/controller.Kinds): what the chart's
// templates need to turn each kind off and pass its values as its flags.
//
// Usage: go run ./test/tools/chartkinds FILE
package main

import (
	"fmt"
	"os"

	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: chartkinds FILE")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], jobframework.ChartKinds(controller.Kinds()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "chartkinds:", err)
		os.Exit(1)
	}
}
