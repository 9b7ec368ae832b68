package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event the harness reads.
type AuditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	Stage           string    `json:"stage"`
}

// Resource is "resource" or "resource/subresource" ("" for non-resource URLs).
func (e *AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// Namespace of the object the request was about.
func (e *AuditEvent) Namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

// Name of the object the request was about.
func (e *AuditEvent) Name() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Name
}

// Code is the response's HTTP status code (0 when unknown).
func (e *AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// IsWrite is true for requests that change stored state.
func (e *AuditEvent) IsWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection", "apply":
		return true
	}
	return false
}

// From reports whether the request came from the program whose user agent
// starts with "<prog>/" (client-go's default user agent is the binary's name).
func (e *AuditEvent) From(prog string) bool {
	return strings.HasPrefix(e.UserAgent, prog+"/")
}

// AuditLog reads an API server's JSON audit log incrementally.
type AuditLog struct {
	path   string
	offset int64
}

// OpenAuditLog starts reading path at its current end, so that only later
// requests are read.
func OpenAuditLog(path string) (*AuditLog, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &AuditLog{path: path, offset: st.Size()}, nil
}

// Read returns the complete events written since the last Read.
func (l *AuditLog) Read() ([]AuditEvent, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var out []AuditEvent
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return out, nil // a partial last line is read next time
		}
		if err != nil {
			return out, fmt.Errorf("audit log: %w", err)
		}
		l.offset += int64(len(line))
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return out, fmt.Errorf("audit log line at %d: %w", l.offset, err)
		}
		if e.Stage == "ResponseComplete" || e.Stage == "Panic" {
			out = append(out, e)
		}
	}
}

// Count tallies requests by "verb resource".
type Count map[string]int

// Add counts e.
func (c Count) Add(e *AuditEvent) { c[e.Verb+" "+e.Resource()]++ }

// Total is the sum of all counts.
func (c Count) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}
