// Command crddesc gives the fields controller-gen leaves undocumented a short
// description, so that `kubectl explain` says something for every field of
// Trainyard's CRDs. controller-gen documents every field from its Go comment,
// except the fields of an embedded ObjectMeta (generateEmbeddedObjectMeta:
// name, namespace, labels, annotations, finalizers of a pod or JobSet
// template), which come from a type it does not read comments of.
//
// It edits controller-gen's output in place, line by line: the output's layout
// is regular (two-space indentation, one key per line), and a line-based edit
// keeps the file byte-for-byte as controller-gen wrote it everywhere else.
//
// Usage: go run ./test/tools/crddesc FILE...
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// metaDescriptions are the descriptions of an embedded ObjectMeta's fields.
var metaDescriptions = map[string]string{
	"annotations": "annotations to set on the object made from this template (key/value pairs).",
	"labels":      "labels to set on the object made from this template (key/value pairs).",
	"finalizers":  "finalizers of the object made from this template.",
	"name":        "name of the object made from this template; usually left to its owner.",
	"namespace":   "namespace of the object made from this template; always the owner's.",
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crddesc FILE...")
		os.Exit(2)
	}
	for _, f := range os.Args[1:] {
		if err := fix(f); err != nil {
			fmt.Fprintln(os.Stderr, "crddesc:", err)
			os.Exit(1)
		}
	}
}

func fix(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out := Describe(in)
	if bytes.Equal(in, out) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// indent is the number of leading spaces of a line.
func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// Describe adds a description to each undocumented field of an embedded
// ObjectMeta: a key of metaDescriptions directly under the properties of a
// "metadata:" key that is itself under properties (not the CRD's or the
// document's own metadata).
func Describe(in []byte) []byte {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(in))
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var out []string
	// metaProps is the indentation of the fields under the properties of an
	// embedded metadata block, or -1 outside one.
	metaProps := -1
	for i, l := range lines {
		out = append(out, l)
		trimmed := strings.TrimSpace(l)
		ind := indent(l)
		if metaProps >= 0 && trimmed != "" && ind < metaProps {
			metaProps = -1
		}
		if trimmed == "properties:" && i > 0 && isEmbeddedMeta(lines, i) {
			metaProps = ind + 2
			continue
		}
		if metaProps < 0 || ind != metaProps || !strings.HasSuffix(trimmed, ":") {
			continue
		}
		desc, ok := metaDescriptions[strings.TrimSuffix(trimmed, ":")]
		if !ok || i+1 >= len(lines) || strings.HasPrefix(strings.TrimSpace(lines[i+1]), "description:") {
			continue
		}
		out = append(out, strings.Repeat(" ", ind+2)+"description: "+desc)
	}
	return []byte(strings.Join(out, "\n") + "\n")
}

// isEmbeddedMeta reports whether the "properties:" at line i belongs to a
// "metadata:" key nested in a schema (deeper than the document's metadata).
func isEmbeddedMeta(lines []string, i int) bool {
	ind := indent(lines[i])
	for j := i - 1; j >= 0; j-- {
		if strings.TrimSpace(lines[j]) == "" {
			continue
		}
		if indent(lines[j]) < ind {
			return strings.TrimSpace(lines[j]) == "metadata:" && indent(lines[j]) > 0
		}
	}
	return false
}
