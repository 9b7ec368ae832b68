package flux

import (
	"crypto/ecdh"
	"regexp"
	"strings"
	"testing"
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

func TestCurveCert(t *testing.T) {
	a, err := curveCert("job", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := curveCert("job", "uid-1")
	other, _ := curveCert("job", "uid-2")
	if a != again {
		t.Error("the same UID gave two certificates")
	}
	if a == other {
		t.Error("two UIDs gave the same certificate")
	}
	keys := regexp.MustCompile(`(?m)^    (public|secret)-key = "(.{40})"$`).FindAllStringSubmatch(a, -1)
	if len(keys) != 2 || !strings.Contains(a, "metadata\n    name = \"job\"\ncurve\n") {
		t.Fatalf("certificate layout:\n%s", a)
	}
	// The public key is the X25519 public key of the secret key.
	priv, err := ecdh.X25519().NewPrivateKey(z85Decode(keys[1][2]))
	if err != nil {
		t.Fatal(err)
	}
	if got := z85Decode(keys[0][2]); string(got) != string(priv.PublicKey().Bytes()) {
		t.Error("public-key is not the secret key's public key")
	}
}
