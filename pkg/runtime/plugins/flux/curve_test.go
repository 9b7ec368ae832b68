package flux

import (
	"bytes"
	"crypto/ecdh"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestZ85Encode(t *testing.T) {
	// The test vector of the Z85 specification (rfc.zeromq.org/spec/32).
	got, err := z85Encode([]byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B})
	if err != nil || got != "HelloWorld" {
		t.Errorf("z85Encode = %q, %v; want HelloWorld", got, err)
	}
	if got, _ := z85Encode([]byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}); got != "00000%nSc0" {
		t.Errorf("z85Encode(zeros, ones) = %q, want 00000%%nSc0 (0xffffffff = 82,23,54,12,0 in base 85)", got)
	}
	if _, err := z85Encode([]byte{1, 2, 3}); err == nil {
		t.Error("z85Encode of 3 bytes: want an error")
	}
}

// z85Decode is the inverse, for checking the certificate's keys.
func z85Decode(s string) []byte {
	var out []byte
	for i := 0; i < len(s); i += 5 {
		var v uint32
		for _, c := range s[i : i+5] {
			v = v*85 + uint32(strings.IndexRune(z85Alphabet, c))
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out
}

// certKeys returns the decoded public and secret keys of a certificate,
// checking its layout and that both are 40 Z85 characters (32 bytes).
func certKeys(t *testing.T, cert, job string) (pub, sec []byte) {
	t.Helper()
	keys := regexp.MustCompile(`(?m)^    (public|secret)-key = "(.{40})"$`).FindAllStringSubmatch(cert, -1)
	if len(keys) != 2 || keys[0][1] != "public" || !strings.Contains(cert, "metadata\n    name = \""+job+"\"\ncurve\n") {
		t.Fatalf("certificate layout:\n%s", cert)
	}
	for _, k := range keys {
		for _, c := range k[2] {
			if !strings.ContainsRune(z85Alphabet, c) {
				t.Fatalf("%s-key %q: %q is not a Z85 character", k[1], k[2], c)
			}
		}
	}
	return z85Decode(keys[0][2]), z85Decode(keys[1][2])
}

// TestCurveKeysMatchZeroMQ: the key pair of ZeroMQ's CURVE documentation
// (zmq_curve(7)) comes out of our X25519 and Z85 as libzmq makes it.
func TestCurveKeysMatchZeroMQ(t *testing.T) {
	sec := z85Decode("D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs")
	priv, err := ecdh.X25519().NewPrivateKey(sec)
	if err != nil {
		t.Fatal(err)
	}
	if pub, _ := z85Encode(priv.PublicKey().Bytes()); pub != "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID" {
		t.Errorf("public key %q, want ZeroMQ's Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID", pub)
	}
}

// TestGenerateCurveCert: the secret key is the 32 random bytes and nothing
// else; the public key is its X25519 public key.
func TestGenerateCurveCert(t *testing.T) {
	seed := bytes.Repeat([]byte{0x5a}, 32)
	cert, err := GenerateCurveCert(bytes.NewReader(seed), "job")
	if err != nil {
		t.Fatal(err)
	}
	pub, sec := certKeys(t, cert, "job")
	if !bytes.Equal(sec, seed) {
		t.Errorf("secret-key %x, want the random bytes %x", sec, seed)
	}
	priv, err := ecdh.X25519().NewPrivateKey(sec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pub, priv.PublicKey().Bytes()) {
		t.Error("public-key is not the secret key's public key")
	}
	if _, err := GenerateCurveCert(bytes.NewReader(seed[:31]), "job"); err == nil {
		t.Error("31 random bytes: want an error")
	}
}

// TestFillCurveCert: every fill makes a new valid key pair, for the same
// TrainJob as for two TrainJobs.
func TestFillCurveCert(t *testing.T) {
	seen := map[string]string{}
	for _, job := range []string{"job", "job", "other"} {
		s := &corev1.Secret{}
		if err := FillCurveCert(job)(s); err != nil {
			t.Fatal(err)
		}
		if len(s.Data) != 1 {
			t.Fatalf("Secret data keys: %v, want only curve.cert", s.Data)
		}
		pub, sec := certKeys(t, string(s.Data["curve.cert"]), job)
		priv, err := ecdh.X25519().NewPrivateKey(sec)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pub, priv.PublicKey().Bytes()) {
			t.Error("public-key is not the secret key's public key")
		}
		if prev, ok := seen[string(sec)]; ok {
			t.Errorf("TrainJobs %s and %s got the same secret key", prev, job)
		}
		seen[string(sec)] = job
	}
}
