package initializer

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// S3 credentials: a static key (ACCESS_KEY_ID, SECRET_ACCESS_KEY, with
// AWS_SESSION_TOKEN when the key is temporary), or a web identity
// (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, as EKS's IAM roles for
// service accounts set them) exchanged with STS AssumeRoleWithWebIdentity for
// temporary credentials, exchanged again before they expire. The exchange is
// one unsigned form POST, written here rather than through the AWS SDK, for
// the same reason as sigv4.go.

// credentials sign S3 requests.
type credentials struct {
	accessKey, secretKey, sessionToken string
}

// credentialSource gives the credentials of the next request; none (the zero
// value, ok false) means anonymous requests.
type credentialSource interface {
	get(ctx context.Context) (creds credentials, ok bool, err error)
}

type staticCredentials struct{ creds credentials }

func (s staticCredentials) get(context.Context) (credentials, bool, error) {
	return s.creds, s.creds.accessKey != "", nil
}

// DefaultRoleSessionName names the STS sessions of the initializer when
// AWS_ROLE_SESSION_NAME is not set.
const DefaultRoleSessionName = "trainyard-initializer"

// credentialsFor picks the S3 credentials of c: a static key when one is
// given, else a web identity, else none.
func credentialsFor(c *Config, region string) (credentialSource, error) {
	if c.AccessKeyID != "" {
		return staticCredentials{credentials{c.AccessKeyID, c.SecretAccessKey, c.SessionToken}}, nil
	}
	if c.WebIdentityTokenFile == "" && c.RoleARN == "" {
		return staticCredentials{}, nil
	}
	if c.WebIdentityTokenFile == "" || c.RoleARN == "" {
		return nil, errors.New("a web identity needs both AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN")
	}
	ep := c.STSEndpoint
	if ep == "" {
		ep = "https://sts.amazonaws.com"
		if region != "" && region != "us-east-1" {
			ep = "https://sts." + region + ".amazonaws.com"
		}
	}
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	if _, err := url.Parse(ep); err != nil {
		return nil, fmt.Errorf("AWS_STS_ENDPOINT %q: %w", c.STSEndpoint, err)
	}
	name := c.RoleSessionName
	if name == "" {
		name = DefaultRoleSessionName
	}
	// The token goes to the STS endpoint only: no redirect is followed.
	client := *c.HTTP
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &webIdentity{client: &client, endpoint: ep, tokenFile: c.WebIdentityTokenFile, roleARN: c.RoleARN, session: name, now: time.Now}, nil
}

// webIdentity exchanges the token in tokenFile (read again at each exchange:
// the kubelet rotates projected tokens) for temporary credentials of roleARN.
type webIdentity struct {
	client                                *http.Client
	endpoint, tokenFile, roleARN, session string
	now                                   func() time.Time

	mu        sync.Mutex
	creds     credentials
	refreshAt time.Time
}

// refreshBefore is how long before their expiry credentials are exchanged
// again (at most half their life).
const refreshBefore = 5 * time.Minute

func (w *webIdentity) get(ctx context.Context) (credentials, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.creds.accessKey != "" && w.now().Before(w.refreshAt) {
		return w.creds, true, nil
	}
	creds, expires, err := w.assumeRole(ctx)
	if err != nil {
		return credentials{}, false, err
	}
	now := w.now()
	early := refreshBefore
	if life := expires.Sub(now); life < 2*early {
		early = life / 2
	}
	w.creds, w.refreshAt = creds, expires.Add(-early)
	return creds, true, nil
}

type stsResponse struct {
	Result struct {
		Credentials struct {
			AccessKeyID     string    `xml:"AccessKeyId"`
			SecretAccessKey string    `xml:"SecretAccessKey"`
			SessionToken    string    `xml:"SessionToken"`
			Expiration      time.Time `xml:"Expiration"`
		} `xml:"Credentials"`
	} `xml:"AssumeRoleWithWebIdentityResult"`
}

type stsError struct {
	Error struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
}

func (w *webIdentity) assumeRole(ctx context.Context) (credentials, time.Time, error) {
	tok, err := os.ReadFile(w.tokenFile)
	if err != nil {
		return credentials{}, time.Time{}, permanent(fmt.Errorf("reading AWS_WEB_IDENTITY_TOKEN_FILE: %w", err))
	}
	form := url.Values{
		"Action":           {"AssumeRoleWithWebIdentity"},
		"Version":          {"2011-06-15"},
		"RoleArn":          {w.roleARN},
		"RoleSessionName":  {w.session},
		"WebIdentityToken": {strings.TrimSpace(string(tok))},
	}
	what := "STS AssumeRoleWithWebIdentity for " + w.roleARN + " at " + w.endpoint
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return credentials{}, time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/xml")
	resp, err := w.client.Do(req)
	if err != nil {
		return credentials{}, time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return credentials{}, time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode/100 != 2 {
		var e stsError
		_ = xml.Unmarshal(body, &e)
		msg := fmt.Sprintf("%s: HTTP %d", what, resp.StatusCode)
		switch {
		case e.Error.Code != "":
			msg += " " + e.Error.Code + ": " + e.Error.Message
		case resp.StatusCode/100 == 3:
			msg += " (a redirect: not followed, the token goes to the STS endpoint only)"
		}
		err := errors.New(msg)
		switch {
		case resp.StatusCode/100 == 5, e.Error.Code == "Throttling", e.Error.Code == "IDPCommunicationError":
			return credentials{}, time.Time{}, err
		}
		return credentials{}, time.Time{}, permanent(err)
	}
	var r stsResponse
	if err := xml.Unmarshal(body, &r); err != nil {
		return credentials{}, time.Time{}, fmt.Errorf("%s: decoding the response: %w", what, err)
	}
	c := r.Result.Credentials
	if c.AccessKeyID == "" || c.SecretAccessKey == "" || c.Expiration.IsZero() {
		return credentials{}, time.Time{}, fmt.Errorf("%s: the response has no credentials", what)
	}
	return credentials{c.AccessKeyID, c.SecretAccessKey, c.SessionToken}, c.Expiration, nil
}
