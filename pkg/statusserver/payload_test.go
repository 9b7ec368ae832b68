package statusserver

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestDecode(t *testing.T) {
	many := `{"trainerStatus":{"metrics":[` + strings.Repeat(`{"name":"m","value":"1"},`, MaxMetrics) + `{"name":"m","value":"1"}]}}`
	cases := map[string]struct {
		body    string
		want    *trainer.TrainerStatus
		wantErr string // substring of the message; "" means success
	}{
		"upstream's example": {
			body: `{"trainerStatus":{"progressPercentage":42,"estimatedRemainingSeconds":120,"metrics":[{"name":"loss","value":"0.25"},{"name":"accuracy","value":"0.9"}],"lastUpdatedTime":"2026-11-23T11:59:00Z"}}`,
			want: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](120),
				Metrics:         []trainer.Metric{{Name: "loss", Value: "0.25"}, {Name: "accuracy", Value: "0.9"}},
				LastUpdatedTime: metav1.NewTime(time.Date(2026, 11, 23, 11, 59, 0, 0, time.UTC))},
		},
		"lastUpdatedTime defaults to now": {
			body: `{"trainerStatus":{"progressPercentage":0}}`,
			want: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](0), LastUpdatedTime: metav1.NewTime(now)},
		},
		"no trainerStatus: nothing to write": {body: `{}`},
		"null trainerStatus":                 {body: `{"trainerStatus":null}`},
		"malformed JSON":                     {body: `{"trainerStatus":{`, wantErr: "malformed JSON"},
		"empty body":                         {body: ``, wantErr: "empty body"},
		"two objects":                        {body: `{} {}`, wantErr: "unexpected data"},
		"unknown top-level field":            {body: `{"trainerStatus":{},"extra":1}`, wantErr: `unknown field "extra"`},
		"unknown nested field":               {body: `{"trainerStatus":{"progress":1}}`, wantErr: `unknown field "progress"`},
		"percentage over 100":                {body: `{"trainerStatus":{"progressPercentage":101}}`, wantErr: "progressPercentage: 101 is not between 0 and 100"},
		"negative percentage":                {body: `{"trainerStatus":{"progressPercentage":-1}}`, wantErr: "progressPercentage: -1 is not between 0 and 100"},
		"fractional percentage":              {body: `{"trainerStatus":{"progressPercentage":4.5}}`, wantErr: "progressPercentage"},
		"percentage as a string":             {body: `{"trainerStatus":{"progressPercentage":"42"}}`, wantErr: "progressPercentage"},
		"negative time left":                 {body: `{"trainerStatus":{"estimatedRemainingSeconds":-5}}`, wantErr: "must not be negative"},
		"too many metrics":                   {body: many, wantErr: "257 metrics, at most 256"},
		"empty metric name":                  {body: `{"trainerStatus":{"metrics":[{"name":"","value":"1"}]}}`, wantErr: "metrics[0].name"},
		"long metric value":                  {body: `{"trainerStatus":{"metrics":[{"name":"a","value":"` + strings.Repeat("9", 65) + `"}]}}`, wantErr: "metrics[0].value"},
		"bad time":                           {body: `{"trainerStatus":{"lastUpdatedTime":"yesterday"}}`, wantErr: "not an RFC 3339 time"},
		// Found by FuzzDecodeRoundTrip: the time is kept as the API server
		// keeps it (UTC, whole seconds), and one it cannot write is refused.
		"time kept in UTC to the second": {
			body: `{"trainerStatus":{"lastUpdatedTime":"2026-11-23T13:59:00.999999+02:00"}}`,
			want: &trainer.TrainerStatus{LastUpdatedTime: metav1.NewTime(time.Date(2026, 11, 23, 11, 59, 0, 0, time.UTC))},
		},
		"year 10000 in UTC":    {body: `{"trainerStatus":{"lastUpdatedTime":"9999-12-31T23:59:59-01:00"}}`, wantErr: "between the years 1 and 9999"},
		"year 0":               {body: `{"trainerStatus":{"lastUpdatedTime":"0000-06-01T00:00:00Z"}}`, wantErr: "between the years 1 and 9999"},
		"zero time once whole": {body: `{"trainerStatus":{"lastUpdatedTime":"0001-01-01T00:00:00.5Z"}}`, wantErr: "not an RFC 3339 time"},
		"oversized body":       {body: `{"trainerStatus":{}}` + strings.Repeat(" ", MaxBodyBytes), wantErr: "body larger than 65536 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(strings.NewReader(tc.body), now)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, errBadPayload) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode error = %v, want a bad-payload error mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecode: any body either decodes to a status the CRD accepts or is
// rejected as a bad payload; Decode never panics or fails otherwise.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"trainerStatus":{"progressPercentage":42,"estimatedRemainingSeconds":120,"metrics":[{"name":"loss","value":"0.25"}],"lastUpdatedTime":"2026-11-23T11:59:00Z"}}`,
		`{}`, `{"trainerStatus":null}`, `{"trainerStatus":{"progressPercentage":101}}`, `[`, `{"a":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := Decode(strings.NewReader(string(body)), now)
		if err != nil {
			if !errors.Is(err, errBadPayload) {
				t.Fatalf("error is not a bad payload: %v", err)
			}
			return
		}
		if st == nil {
			return
		}
		if p := st.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
			t.Fatalf("accepted progressPercentage %d", *p)
		}
		if e := st.EstimatedRemainingSeconds; e != nil && *e < 0 {
			t.Fatalf("accepted estimatedRemainingSeconds %d", *e)
		}
		if len(st.Metrics) > MaxMetrics {
			t.Fatalf("accepted %d metrics", len(st.Metrics))
		}
		for _, m := range st.Metrics {
			if len(m.Name) < 1 || len(m.Name) > MaxMetricNameLen || len(m.Value) < 1 || len(m.Value) > MaxMetricValLen {
				t.Fatalf("accepted metric %q=%q", m.Name, m.Value)
			}
		}
		if st.LastUpdatedTime.IsZero() {
			t.Fatal("accepted a status without lastUpdatedTime (the CRD requires it)")
		}
	})
}
