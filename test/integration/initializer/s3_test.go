// Package initializer runs the initializer (pkg/initializer) against the S3
// server of the tests (test/tools/s3server: gofakes3, with its SigV4 check
// turned on by -credentials), built and started here on 127.0.0.1, with the
// credentials that reach it: a temporary key with its session token, and a
// web identity exchanged at an STS stub for temporary credentials.
package initializer

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/pkg/initializer"
)

var s3Server string // the built test/tools/s3server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "initializer-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s3Server = filepath.Join(dir, "s3-server")
	build := exec.Command("go", "build", "-o", s3Server, ".")
	build.Dir = filepath.Join("..", "..", "tools", "s3server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building test/tools/s3server: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// startS3 runs the S3 server with bucket "data" holding files, accepting only
// requests signed with one of credentials (ACCESS_KEY:SECRET[:TOKEN]); it
// returns the endpoint.
func startS3(t *testing.T, files map[string]string, credentials ...string) string {
	t.Helper()
	seed := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(seed, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-listen", "127.0.0.1:0", "-seed", "data=" + seed}
	for _, c := range credentials {
		args = append(args, "-credentials", c)
	}
	cmd := exec.Command(s3Server, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go func() { // what it says of denied requests
				for sc.Scan() {
					fmt.Fprintln(os.Stderr, "s3-server: "+sc.Text())
				}
			}()
			return addr
		}
	}
	t.Fatalf("the S3 server did not start: %v", sc.Err())
	return ""
}

// run fetches s3://data/ds with env (the initializer's environment).
func run(t *testing.T, env map[string]string) (map[string]string, error) {
	t.Helper()
	env["STORAGE_URI"] = "s3://data/ds"
	c := initializer.FromEnv(initializer.Dataset, func(k string) string { return env[k] })
	c.Dest = filepath.Join(t.TempDir(), "dataset")
	c.Attempts, c.RetryBase, c.ProgressEvery = 1, time.Millisecond, time.Hour
	c.Log = &strings.Builder{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := initializer.Run(ctx, c); err != nil {
		return nil, err
	}
	got := map[string]string{}
	err := filepath.WalkDir(c.Dest, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(c.Dest, p)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	return got, err
}

var files = map[string]string{"ds/train/part-0.csv": "x,y\n1,2\n", "ds/labels.txt": "cat\ndog\n"}

func checkFiles(t *testing.T, got map[string]string) {
	t.Helper()
	want := map[string]string{"train/part-0.csv": "x,y\n1,2\n", "labels.txt": "cat\ndog\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fetched %v, want %v", got, want)
	}
}

// TestSessionToken: a temporary key works only with its session token
// (AWS_SESSION_TOKEN), which the server finds, signed, on every request.
func TestSessionToken(t *testing.T) {
	endpoint := startS3(t, files, "ASIATEMPKEY:temp-secret:FwoGZXIvYXdzEJr//token+with/odd=chars")
	env := map[string]string{"ENDPOINT": endpoint, "REGION": "eu-west-1",
		"ACCESS_KEY_ID": "ASIATEMPKEY", "SECRET_ACCESS_KEY": "temp-secret", "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEJr//token+with/odd=chars"}
	got, err := run(t, env)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, got)

	// The server does check: without the token, or with another secret, it refuses.
	delete(env, "AWS_SESSION_TOKEN")
	if _, err := run(t, env); err == nil || !strings.Contains(err.Error(), "HTTP 403 InvalidToken") {
		t.Errorf("without the session token: %v, want HTTP 403 InvalidToken", err)
	}
	env["AWS_SESSION_TOKEN"], env["SECRET_ACCESS_KEY"] = "FwoGZXIvYXdzEJr//token+with/odd=chars", "wrong"
	if _, err := run(t, env); err == nil || !strings.Contains(err.Error(), "HTTP 403 SignatureDoesNotMatch") {
		t.Errorf("with another secret: %v, want HTTP 403 SignatureDoesNotMatch", err)
	}
}

// TestWebIdentity: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, no key: the
// token is exchanged at the STS endpoint (AWS_STS_ENDPOINT, here a stub that
// answers as STS's query API documents: a protocol test) for temporary
// credentials, the only ones the S3 server accepts.
func TestWebIdentity(t *testing.T) {
	const role = "arn:aws:iam::123456789012:role/dataset-reader"
	var mu sync.Mutex
	var calls []string
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s Action=%s RoleArn=%s RoleSessionName=%s WebIdentityToken=%s Authorization=%q",
			r.Method, r.PostForm.Get("Action"), r.PostForm.Get("RoleArn"), r.PostForm.Get("RoleSessionName"),
			r.PostForm.Get("WebIdentityToken"), r.Header.Get("Authorization")))
		mu.Unlock()
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>ASIAFROMSTS</AccessKeyId>
      <SecretAccessKey>sts-secret</SecretAccessKey>
      <SessionToken>sts-session-token</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	defer sts.Close()
	endpoint := startS3(t, files, "ASIAFROMSTS:sts-secret:sts-session-token")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("eyJhbGciOiJSUzI1NiJ9.service-account.sig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := run(t, map[string]string{"ENDPOINT": endpoint, "REGION": "eu-west-1",
		"AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_ROLE_ARN": role, "AWS_ROLE_SESSION_NAME": "job-42", "AWS_STS_ENDPOINT": sts.URL})
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, got)
	want := `POST Action=AssumeRoleWithWebIdentity RoleArn=` + role + ` RoleSessionName=job-42 WebIdentityToken=eyJhbGciOiJSUzI1NiJ9.service-account.sig Authorization=""`
	if len(calls) != 1 || calls[0] != want {
		t.Errorf("STS calls %q, want one: %s", calls, want)
	}
}
