package statusserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Limits of a request body, as Kubeflow Trainer v2.3 sets them (and as the
// TrainJob CRD validates trainerStatus).
const (
	MaxBodyBytes     = 64 << 10
	MaxMetrics       = 256
	MaxMetricNameLen = 64
	MaxMetricValLen  = 64
)

// request is the body of a POST: {"trainerStatus": {...}}. Fields are
// pointers so that absent and zero differ.
type request struct {
	TrainerStatus *trainerStatus `json:"trainerStatus"`
}

type trainerStatus struct {
	ProgressPercentage        *int32   `json:"progressPercentage"`
	EstimatedRemainingSeconds *int32   `json:"estimatedRemainingSeconds"`
	Metrics                   []metric `json:"metrics"`
	LastUpdatedTime           *string  `json:"lastUpdatedTime"`
}

type metric struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// errBadPayload marks errors that are the client's fault (HTTP 400).
var errBadPayload = errors.New("invalid payload")

func badPayload(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadPayload, fmt.Sprintf(format, args...))
}

// Decode reads one request body: strict JSON (unknown fields, trailing data
// and values of the wrong type are errors), at most MaxBodyBytes, with every
// value in the range the TrainJob CRD allows, so that a payload that passes
// here is one the API server accepts. It returns nil, nil for a body without
// trainerStatus (nothing to write). lastUpdatedTime, when absent, is now:
// the CRD requires it, and a trainer that leaves it out still reported now.
// Either is kept as the API server keeps it, in UTC to the second, so that
// what Decode returns is what a later read of the TrainJob returns.
func Decode(r io.Reader, now time.Time) (*trainer.TrainerStatus, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, badPayload("body larger than %d bytes", MaxBodyBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		return nil, badPayload("%s", jsonError(err))
	}
	if dec.More() {
		return nil, badPayload("unexpected data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badPayload("unexpected data after the JSON object")
	}
	in := req.TrainerStatus
	if in == nil {
		return nil, nil
	}
	out := &trainer.TrainerStatus{
		ProgressPercentage:        in.ProgressPercentage,
		EstimatedRemainingSeconds: in.EstimatedRemainingSeconds,
	}
	if p := in.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
		return nil, badPayload("trainerStatus.progressPercentage: %d is not between 0 and 100", *p)
	}
	if e := in.EstimatedRemainingSeconds; e != nil && *e < 0 {
		return nil, badPayload("trainerStatus.estimatedRemainingSeconds: %d must not be negative", *e)
	}
	if len(in.Metrics) > MaxMetrics {
		return nil, badPayload("trainerStatus.metrics: %d metrics, at most %d are allowed", len(in.Metrics), MaxMetrics)
	}
	for i, m := range in.Metrics {
		if n := len(m.Name); n < 1 || n > MaxMetricNameLen {
			return nil, badPayload("trainerStatus.metrics[%d].name: must be 1 to %d characters", i, MaxMetricNameLen)
		}
		if n := len(m.Value); n < 1 || n > MaxMetricValLen {
			return nil, badPayload("trainerStatus.metrics[%d].value: must be 1 to %d characters", i, MaxMetricValLen)
		}
		out.Metrics = append(out.Metrics, trainer.Metric{Name: m.Name, Value: m.Value})
	}
	out.LastUpdatedTime = metav1.NewTime(now.UTC().Truncate(time.Second))
	if t := in.LastUpdatedTime; t != nil {
		parsed, err := time.Parse(time.RFC3339, *t)
		// The API server keeps a time in UTC to the second, written as RFC
		// 3339: store what it will return, and refuse a time it cannot write
		// (its year in UTC outside 1 to 9999) or reads as unset (the zero time).
		parsed = parsed.UTC().Truncate(time.Second)
		if err != nil || parsed.IsZero() || parsed.Year() < 1 || parsed.Year() > 9999 {
			return nil, badPayload("trainerStatus.lastUpdatedTime: %q is not an RFC 3339 time between the years 1 and 9999 (UTC)", *t)
		}
		out.LastUpdatedTime = metav1.NewTime(parsed)
	}
	return out, nil
}

// jsonError turns a decoder error into a message that names the field.
func jsonError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return fmt.Sprintf("%s: %s is not a valid %s", typeErr.Field, typeErr.Value, typeErr.Type)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF):
		return "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	}
	return err.Error()
}
