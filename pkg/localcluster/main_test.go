package localcluster

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain gives controller-runtime a logger: the clients of the clusters the
// tests bring up log nothing worth reading (the components log to their files,
// which the tests print on failure), and without one controller-runtime prints
// a stack trace into the test's output.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
