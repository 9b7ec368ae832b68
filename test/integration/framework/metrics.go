package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIServerRequests sums the API server's apiserver_request_total for
// resource (and verb, "" any): how many such requests it served, for tests
// that count what a flood cost.
func APIServerRequests(cfg *rest.Config, resource, verb string) (int64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	b, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	var n int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "apiserver_request_total{") || !strings.Contains(l, `resource="`+resource+`"`) ||
			verb != "" && !strings.Contains(l, `verb="`+verb+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", l, err)
		}
		n += int64(v)
	}
	return n, nil
}
