// Package gpus holds what a process node knows and tells about NVIDIA GPUs:
// the list nvidia-smi prints, the Node labels NVIDIA's GPU feature discovery
// (GFD) would set, and the pod annotation that names the GPUs each container
// was given. It depends on the standard library only, so that the trainyard
// CLI reads the annotation without linking the node agent.
package gpus

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Resource is the extended resource of NVIDIA GPUs, as the device plugin names it.
const Resource = "nvidia.com/gpu"

// Node labels GFD sets, which the process node sets the same way.
const (
	LabelProduct = "nvidia.com/gpu.product" // the name, spaces replaced by '-'
	LabelMemory  = "nvidia.com/gpu.memory"  // MiB
	LabelCount   = "nvidia.com/gpu.count"
)

// Annotation is set on a pod by the process node that runs it: the UUIDs of
// the GPUs each container was given, "container=GPU-a,GPU-b;other=GPU-c",
// containers by name, those without GPUs left out.
const Annotation = "trainyard.io/gpus"

// QueryArgs are the arguments of nvidia-smi that list the GPUs, one line
// each: index, UUID, name, total memory ("0, GPU-4132…, NVIDIA H200, 143771 MiB").
var QueryArgs = []string{"--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader"}

// GPU is one GPU of the node.
type GPU struct {
	Index     int
	UUID      string
	Name      string
	MemoryMiB int64 // 0 when nvidia-smi does not say ([N/A])
}

// Parse reads the output of nvidia-smi with QueryArgs, ordered by index.
// Blank lines are skipped; a line that is not index, UUID, name, memory is an
// error naming it. The name is everything between the UUID and the memory,
// so a name with a comma survives; memory is "<n> MiB" (the unit optional),
// and a value nvidia-smi brackets ("[N/A]") is 0.
func Parse(out string) ([]GPU, error) {
	var list []GPU
	seen := map[string]bool{}
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) < 4 {
			return nil, fmt.Errorf("nvidia-smi line %d %q: want index, uuid, name, memory.total", n+1, line)
		}
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		idx, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d %q: index: %w", n+1, line, err)
		}
		uuid := fields[1]
		if !strings.HasPrefix(uuid, "GPU-") {
			return nil, fmt.Errorf("nvidia-smi line %d %q: %q is not a GPU UUID", n+1, line, uuid)
		}
		if seen[uuid] {
			return nil, fmt.Errorf("nvidia-smi line %d %q: UUID %s listed twice", n+1, line, uuid)
		}
		seen[uuid] = true
		mem, err := parseMiB(fields[len(fields)-1])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d %q: memory: %w", n+1, line, err)
		}
		name := strings.Join(fields[2:len(fields)-1], ", ")
		list = append(list, GPU{Index: idx, UUID: uuid, Name: name, MemoryMiB: mem})
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Index < list[j].Index })
	return list, nil
}

// parseMiB reads "143771 MiB", "143771" or, as 0, a bracketed "[N/A]".
func parseMiB(s string) (int64, error) {
	if strings.HasPrefix(s, "[") {
		return 0, nil
	}
	num, unit, _ := strings.Cut(s, " ")
	if unit = strings.TrimSpace(unit); unit != "" && unit != "MiB" {
		return 0, fmt.Errorf("unit %q, want MiB", unit)
	}
	return strconv.ParseInt(num, 10, 64)
}

// Labels are GFD's labels for these GPUs: product and memory of the first
// (GFD describes a node as if its GPUs were alike) and their count; none
// without GPUs.
func Labels(list []GPU) map[string]string {
	if len(list) == 0 {
		return nil
	}
	l := map[string]string{LabelCount: strconv.Itoa(len(list))}
	if p := productLabel(list[0].Name); p != "" {
		l[LabelProduct] = p
	}
	if list[0].MemoryMiB > 0 {
		l[LabelMemory] = strconv.FormatInt(list[0].MemoryMiB, 10)
	}
	return l
}

// productLabel turns a GPU name into a label value as GFD does, spaces
// becoming '-' ("NVIDIA H200" → "NVIDIA-H200"); characters a label value
// cannot hold are dropped and it is cut to 63 characters.
func productLabel(name string) string {
	var b strings.Builder
	for _, r := range strings.ReplaceAll(strings.TrimSpace(name), " ", "-") {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		}
	}
	v := b.String()
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-_.")
}

// FormatAnnotation is the value of Annotation for the GPUs of each container;
// "" when no container has any.
func FormatAnnotation(byContainer map[string][]string) string {
	names := make([]string, 0, len(byContainer))
	for name, uuids := range byContainer {
		if len(uuids) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, name+"="+strings.Join(byContainer[name], ","))
	}
	return strings.Join(parts, ";")
}

// ParseAnnotation reads a value of Annotation; parts it cannot read are skipped.
func ParseAnnotation(v string) map[string][]string {
	out := map[string][]string{}
	for _, part := range strings.Split(v, ";") {
		name, list, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || list == "" {
			continue
		}
		out[name] = strings.Split(list, ",")
	}
	return out
}
