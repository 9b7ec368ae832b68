//go:build with_etcd

package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

// etcd is served too, at the release the API server's etcd client is (the
// version Kubernetes tests with), so that it shares gRPC, protobuf,
// OpenTelemetry and the client with the API server instead of compiling its
// own: etcdmain.Main is what etcd's own main calls.
func init() {
	components["etcd"] = func() int { etcdmain.Main(os.Args); return 0 }
}
