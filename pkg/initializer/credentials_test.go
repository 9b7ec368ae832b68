package initializer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stsStub answers AssumeRoleWithWebIdentity as STS's query API does, for
// one role and the token in want: a protocol test (the request's form and
// the response's XML as AWS documents them), not AWS's behaviour.
type stsStub struct {
	role    string
	expires func() time.Time

	mu     sync.Mutex
	tokens []string // the web identity tokens received
}

func (s *stsStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		http.Error(w, "want a form POST", http.StatusBadRequest)
		return
	}
	f := r.PostForm
	if f.Get("Action") != "AssumeRoleWithWebIdentity" || f.Get("Version") != "2011-06-15" || f.Get("RoleArn") != s.role ||
		f.Get("RoleSessionName") == "" || r.Header.Get("Authorization") != "" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code><Message>unexpected request %v</Message></Error></ErrorResponse>`, f)
		return
	}
	s.mu.Lock()
	s.tokens = append(s.tokens, f.Get("WebIdentityToken"))
	n := len(s.tokens)
	s.mu.Unlock()
	if f.Get("WebIdentityToken") == "expired" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `<ErrorResponse><Error><Type>Sender</Type><Code>ExpiredTokenException</Code><Message>Token expired</Message></Error></ErrorResponse>`)
		return
	}
	fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:team:trainer</SubjectFromWebIdentityToken>
    <Credentials>
      <AccessKeyId>ASIA%d</AccessKeyId>
      <SecretAccessKey>secret-%d</SecretAccessKey>
      <SessionToken>session-%d</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>`, n, n, n, s.expires().UTC().Format(time.RFC3339))
}

// TestWebIdentityRefresh: the token file is exchanged for credentials, which
// serve until 5 minutes before they expire; then the file, read again (the
// kubelet rotates it), is exchanged again.
func TestWebIdentityRefresh(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sts := &stsStub{role: "arn:aws:iam::123456789012:role/reader", expires: func() time.Time { return now.Add(time.Hour) }}
	srv := httptest.NewServer(sts)
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("jwt-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{Kind: Dataset, WebIdentityTokenFile: tokenFile, RoleARN: sts.role, STSEndpoint: srv.URL}
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	src, err := credentialsFor(&c, "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	w := src.(*webIdentity)
	w.now = func() time.Time { return now }
	get := func(wantKey string) {
		t.Helper()
		creds, ok, err := w.get(context.Background())
		if err != nil || !ok || creds.accessKey != wantKey || creds.sessionToken != "session-"+strings.TrimPrefix(wantKey, "ASIA") {
			t.Fatalf("credentials %+v, %v, %v; want %s", creds, ok, err, wantKey)
		}
	}
	get("ASIA1")
	start := now
	now = start.Add(54 * time.Minute)
	get("ASIA1")
	if err := os.WriteFile(tokenFile, []byte("jwt-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = start.Add(56 * time.Minute)
	get("ASIA2")
	if got := strings.Join(sts.tokens, ","); got != "jwt-1,jwt-2" {
		t.Errorf("STS got tokens %s, want jwt-1,jwt-2", got)
	}
}

// TestWebIdentityErrors: a refused token fails the run at once with STS's
// code; the token is not sent to where STS redirects; a role without a
// token file is a configuration error.
func TestWebIdentityErrors(t *testing.T) {
	sts := &stsStub{role: "arn:aws:iam::1:role/r", expires: func() time.Time { return time.Now().Add(time.Hour) }}
	srv := httptest.NewServer(sts)
	defer srv.Close()
	elsewhere := &recorder{}
	elsewhereSrv := httptest.NewServer(elsewhere)
	defer elsewhereSrv.Close()
	redirecting := httptest.NewServer(http.RedirectHandler(elsewhereSrv.URL, http.StatusTemporaryRedirect))
	defer redirecting.Close()
	dir := t.TempDir()
	expired := filepath.Join(dir, "expired")
	if err := os.WriteFile(expired, []byte("expired"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		env     map[string]string
		wantErr string
	}{
		"expired token": {
			env:     map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": expired, "AWS_ROLE_ARN": sts.role, "AWS_STS_ENDPOINT": srv.URL},
			wantErr: "STS AssumeRoleWithWebIdentity for arn:aws:iam::1:role/r at " + srv.URL + ": HTTP 400 ExpiredTokenException: Token expired",
		},
		"a redirecting STS": {
			env:     map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": expired, "AWS_ROLE_ARN": sts.role, "AWS_ENDPOINT_URL_STS": redirecting.URL},
			wantErr: "HTTP 307",
		},
		"no token file": {
			env:     map[string]string{"AWS_ROLE_ARN": sts.role},
			wantErr: "a web identity needs both AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN",
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.env["STORAGE_URI"] = "s3://bucket/data"
			tc.env["ENDPOINT"] = "http://127.0.0.1:1"
			c := FromEnv(Dataset, func(k string) string { return tc.env[k] })
			c.Dest = filepath.Join(t.TempDir(), "dataset")
			log, err := fetch(t, c)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if strings.Contains(log, "retrying") {
				t.Errorf("retried:\n%s", log)
			}
		})
	}
	if got := elsewhere.requests(); len(got) != 0 {
		t.Errorf("the redirect target of STS got %v", got)
	}
}
