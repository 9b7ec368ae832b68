package statusserver

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// CABundle is the CA that signs the server's certificate, as trainers must
// trust it: read from a file (ca.crt next to the webhook's tls.crt, where
// cert-controller and cert-manager both put it) at start and re-read every
// Interval. CAPublisher copies it into each namespace that has TrainJobs
// (CAConfigMapName), and again whenever it changes (Changed), so that a
// rotated CA reaches running trainers too: the kubelet refreshes projected
// ConfigMaps in place.
type CABundle struct {
	Path     string
	Interval time.Duration
	Log      logr.Logger

	mu   sync.RWMutex
	pem  []byte
	next chan struct{} // closed at the next change (Changed)
}

// Changed returns a channel that is closed when the bundle next changes
// (the first load included).
func (c *CABundle) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		c.next = make(chan struct{})
	}
	return c.next
}

// Get returns the current PEM bundle, nil when none was read yet.
func (c *CABundle) Get() []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.pem
}

// Load reads the file once.
func (c *CABundle) Load() error {
	b, err := os.ReadFile(c.Path)
	if err != nil {
		return fmt.Errorf("reading the status server CA: %w", err)
	}
	if err := checkPEM(b); err != nil {
		return fmt.Errorf("status server CA %s: %w", c.Path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !bytes.Equal(c.pem, b) {
		c.pem = b
		c.Log.Info("Loaded the status server CA", "path", c.Path)
		if c.next != nil {
			close(c.next)
			c.next = nil
		}
	}
	return nil
}

// Start re-reads the file until ctx ends (a manager Runnable).
func (c *CABundle) Start(ctx context.Context) error {
	interval := c.Interval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := c.Load(); err != nil && c.Get() == nil {
			c.Log.V(1).Info("Status server CA not available yet", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (*CABundle) NeedLeaderElection() bool { return false }

// checkPEM accepts one or more PEM certificates and nothing else.
func checkPEM(b []byte) error {
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return fmt.Errorf("unexpected PEM block %q", blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no PEM certificate")
	}
	return nil
}
