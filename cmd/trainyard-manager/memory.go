package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
)

// memoryFraction of the container's memory limit is the Go runtime's soft
// limit: the rest is room for what the runtime does not count (or counts
// late) before the kernel's OOM killer would.
const memoryFraction = 0.9

// memoryOptions bound the manager's heap by its container's memory limit.
// Without a soft limit, Go lets the heap grow to twice what is live before
// it collects (GOGC=100), so a manager holding 250 MiB of cached jobs would
// be OOM-killed under a 512 MiB limit although it needs half of it. With the
// limit, the collector runs harder as the heap nears it (more CPU, never
// more than half of it) and the manager fits until what is live does not.
type memoryOptions struct {
	limit string
}

func (o *memoryOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.limit, "memory-limit", "", "the container's memory limit (a quantity: 512Mi, or bytes, as the downward API gives limits.memory); the Go heap's soft limit is 90% of it. Empty: none (GOMEMLIMIT, if set, still applies)")
}

// apply sets the soft limit and returns it in bytes (0: none set here). A
// GOMEMLIMIT in the environment wins: it is the Go runtime's own setting.
func (o *memoryOptions) apply() (int64, error) {
	if o.limit == "" || os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(o.limit)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit %q: %w", o.limit, err)
	}
	limit, ok := q.AsInt64()
	if !ok || limit <= 0 {
		return 0, fmt.Errorf("--memory-limit %q: not a positive number of bytes", o.limit)
	}
	soft := int64(float64(limit) * memoryFraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}
