// Command etcd is etcd's own main, built from the go.etcd.io/etcd/server/v3 module
// so that tests need no downloaded binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
