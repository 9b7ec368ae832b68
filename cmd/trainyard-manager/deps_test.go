package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/test/prereq"
)

// byName are packages that call methods by a name known only at run time
// (reflect's MethodByName). A program that links one keeps every exported
// method of every type it converts to an interface, since the linker cannot
// tell which a name will pick: with text/template (the Flux plugin's
// scripts), the manager's binary was 63.9 MB instead of 50.3 MB, and its
// resident pages grew with it (docs/performance.md, issue 29).
var byName = []string{"text/template", "html/template"}

func TestLinksNoMethodCallsByName(t *testing.T) {
	goBin, err := exec.LookPath("go")
	prereq.Require(t, err == nil, "go not on PATH")
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var linked []string
	for _, pkg := range strings.Fields(string(out)) {
		if slices.Contains(byName, pkg) {
			linked = append(linked, pkg)
		}
	}
	if diff := cmp.Diff([]string(nil), linked); diff != "" {
		t.Errorf("the manager links packages that call methods by name (-want +got); see byName:\n%s", diff)
	}
}
