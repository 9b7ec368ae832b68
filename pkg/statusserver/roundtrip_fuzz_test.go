package statusserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// FuzzDecodeRoundTrip: what Decode accepts is what the API server stores. The
// status, written as JSON (as the client sends it and a later read returns
// it) and decoded again, is the same status: nothing Decode returns is lost
// or changed on the way, and what it returns reads back as the same request.
func FuzzDecodeRoundTrip(f *testing.F) {
	for _, s := range []string{
		`{"trainerStatus":{"progressPercentage":42,"estimatedRemainingSeconds":120,"metrics":[{"name":"loss","value":"0.25"}],"lastUpdatedTime":"2026-11-23T11:59:00Z"}}`,
		`{"trainerStatus":{"metrics":[],"lastUpdatedTime":"2026-11-23T11:59:00.5+02:00"}}`,
		`{"trainerStatus":{"lastUpdatedTime":"9999-12-31T23:59:59-01:00"}}`,
		`{"trainerStatus":{"metrics":[{"name":"\u00e9\ud800","value":"<&>"}]}}`,
		`{"trainerStatus":{}}`,
	} {
		f.Add([]byte(s))
	}
	later := now.Add(time.Hour)
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := Decode(strings.NewReader(string(body)), now)
		if err != nil || st == nil {
			return
		}
		enc, err := json.Marshal(map[string]*trainer.TrainerStatus{"trainerStatus": st})
		if err != nil {
			t.Fatalf("encoding %+v: %v", st, err)
		}
		// A different now: the time must come from the encoded status.
		again, err := Decode(strings.NewReader(string(enc)), later)
		if err != nil {
			t.Fatalf("Decode accepted %q as %+v, which encodes to %s, which it rejects: %v", body, st, enc, err)
		}
		if diff := cmp.Diff(st, again); diff != "" {
			t.Fatalf("Decode accepted %q; encoded as %s it decodes differently (-first +second):\n%s", body, enc, diff)
		}
	})
}
