// Command scrape is the image of the metrics test: from inside a pod, it GETs
// the URL of its argument over HTTPS with its ServiceAccount's token, as
// Prometheus scrapes the manager, and prints the status and the lines of the
// answer that start with its second argument. The manager's metrics
// certificate is self-signed by default, so it is not verified.
package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

const tokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: scrape URL PREFIX")
		os.Exit(2)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	req, err := http.NewRequest(http.MethodGet, os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	cli := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed by design, see above
	}}
	resp, err := cli.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() { _ = resp.Body.Close() }()
	fmt.Printf("status: %d\n", resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), os.Args[2]) {
			fmt.Println(sc.Text())
		}
	}
}
