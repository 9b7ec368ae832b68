// Package harness holds what the benchmark (test/perf/bench) and the chaos test
// (test/perf/chaos) share: TrainJob bursts, watchers that record when each object
// was first seen, running and finished, the API server's audit log, Prometheus
// scrapes, /proc statistics and percentiles.
package harness
