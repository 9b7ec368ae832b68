// Command coredns is CoreDNS with only the plugins the local cluster's
// container nodes need (their cluster DNS, pkg/localcluster/containernode_dns.go): the
// kubernetes plugin answers for the cluster domain, forward sends the rest
// to the host's resolvers, cache keeps the API server's load down, bind
// keeps it on the node's host-only address, errors, health and ready report. CoreDNS's own main imports all of its plugins and
// their SDKs (clouds, etcd, ...); this one builds in a fraction of the time.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins in the order CoreDNS chains them (its
// plugin.cfg's order, restricted to these).
var directives = []string{"bind", "ready", "health", "errors", "cache", "kubernetes", "forward"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
