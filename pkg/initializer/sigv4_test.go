package initializer

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The "GET Object" example of AWS's SigV4 documentation for S3 ("Signature
// Calculations for the Authorization Header: Transferring Payload in a Single
// Chunk"): its published signature checks the canonical request, the string to
// sign and the key derivation.
func TestSignV4AWSExample(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Range", "bytes=0-9")
	signV4(req, credentials{accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}, "us-east-1",
		time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC))
	want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, " +
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	if diff := cmp.Diff(want, req.Header.Get("Authorization")); diff != "" {
		t.Errorf("Authorization (-want +got):\n%s", diff)
	}
}

func TestCanonicalQueryAndURI(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://h/b/dir/a%20b+c.txt?prefix=x%2Fy&list-type=2&continuation-token=a%2Bb%3D", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := canonicalQuery(req.URL.Query()), "continuation-token=a%2Bb%3D&list-type=2&prefix=x%2Fy"; got != want {
		t.Errorf("canonicalQuery = %q, want %q", got, want)
	}
	if got, want := canonicalURI(req.URL), "/b/dir/a%20b%2Bc.txt"; got != want {
		t.Errorf("canonicalURI = %q, want %q", got, want)
	}
}
