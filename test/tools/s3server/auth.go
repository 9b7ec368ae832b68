package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// gofakes3 checks no signature. With -credentials the server does, before
// gofakes3 sees a request: every request must carry an AWS Signature Version 4
// Authorization header of one of the given keys, computed here again from the
// request as it arrived (method, path, query, the signed headers, Host
// included, and the x-amz-content-sha256 payload hash); a key given with a
// session token also needs that token in X-Amz-Security-Token, among the
// signed headers. Anything else is answered 403 with S3's error codes
// (AccessDenied, InvalidAccessKeyId, InvalidToken, SignatureDoesNotMatch,
// RequestTimeTooSkewed). It is the check of a test server, not of AWS: it
// knows the keys it was given and nothing of policies.

type key struct{ secret, token string }

type sigV4Auth struct {
	keys map[string]key
	next http.Handler
}

// parseCredentials reads -credentials ACCESS_KEY:SECRET[:SESSION_TOKEN].
func parseCredentials(s string) (string, key, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", key{}, fmt.Errorf("want ACCESS_KEY:SECRET[:SESSION_TOKEN], got %q", s)
	}
	k := key{secret: parts[1]}
	if len(parts) == 3 {
		k.token = parts[2]
	}
	return parts[0], k, nil
}

func s3Deny(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
}

func (a *sigV4Auth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code, msg := a.check(r); code != "" {
		fmt.Printf("denied %s %s: %s: %s\n", r.Method, r.URL, code, msg)
		s3Deny(w, code, msg)
		return
	}
	a.next.ServeHTTP(w, r)
}

func (a *sigV4Auth) check(r *http.Request) (code, msg string) {
	const algo = "AWS4-HMAC-SHA256 "
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, algo) {
		return "AccessDenied", "anonymous or non-SigV4 request"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, algo), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return "AccessDenied", "malformed Credential"
	}
	akid, day, region, service := scope[0], scope[1], scope[2], scope[3]
	k, ok := a.keys[akid]
	if !ok {
		return "InvalidAccessKeyId", "unknown access key " + akid
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	isSigned := func(h string) bool { return slices.Contains(signed, h) }
	if !sort.StringsAreSorted(signed) || !isSigned("host") || !isSigned("x-amz-date") {
		return "AccessDenied", "SignedHeaders must be sorted and include host and x-amz-date"
	}
	tok := r.Header.Get("X-Amz-Security-Token")
	switch {
	case k.token != "" && tok != k.token:
		return "InvalidToken", "the session token of " + akid + " is missing or wrong"
	case k.token == "" && tok != "":
		return "InvalidToken", akid + " is not a temporary key"
	case tok != "" && !isSigned("x-amz-security-token"):
		return "AccessDenied", "x-amz-security-token is not signed"
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, day) {
		return "AccessDenied", "bad X-Amz-Date"
	}
	if d := time.Since(t); d > 15*time.Minute || d < -15*time.Minute {
		return "RequestTimeTooSkewed", "X-Amz-Date is too far from now"
	}
	var canonHeaders strings.Builder
	for _, h := range signed {
		v := r.Header.Values(h)
		if h == "host" {
			v = []string{r.Host}
		}
		for i := range v {
			v[i] = strings.Join(strings.Fields(v[i]), " ")
		}
		canonHeaders.WriteString(h + ":" + strings.Join(v, ",") + "\n")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = "UNSIGNED-PAYLOAD"
	}
	canonical := strings.Join([]string{r.Method, encode(r.URL.Path, false), canonQuery(r), canonHeaders.String(), strings.Join(signed, ";"), payload}, "\n")
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + strings.Join(scope[1:], "/") + "\n" + hex.EncodeToString(sum[:])
	mac := func(key []byte, s string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	sk := mac(mac(mac(mac([]byte("AWS4"+k.secret), day), region), service), "aws4_request")
	want := hex.EncodeToString(mac(sk, toSign))
	if !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return "SignatureDoesNotMatch", "the signature does not match the request"
	}
	return "", ""
}

func canonQuery(r *http.Request) string {
	q := r.URL.Query()
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		vs := append([]string(nil), q[name]...)
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, encode(name, true)+"="+encode(v, true))
		}
	}
	return strings.Join(parts, "&")
}

// encode is SigV4's URI encoding: all but A-Z a-z 0-9 - _ . ~ (and "/" unless slash).
func encode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~", c) >= 0 || c == '/' && !slash {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
