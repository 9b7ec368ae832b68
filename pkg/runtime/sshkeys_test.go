package runtime_test

import (
	"bytes"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/test/prereq"
)

// sshStrings splits SSH's wire form into its length-prefixed strings.
func sshStrings(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("truncated wire form")
		}
		n := binary.BigEndian.Uint32(b)
		if int(n) > len(b)-4 {
			t.Fatalf("string of %d bytes in %d", n, len(b)-4)
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out
}

func TestFillSSHKeys(t *testing.T) {
	s := &corev1.Secret{}
	if err := runtime.FillSSHKeys(s); err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(s.Data["ssh-privatekey"])
	if block == nil || block.Type != "EC PRIVATE KEY" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("ssh-privatekey is not one PEM EC PRIVATE KEY block:\n%s", s.Data["ssh-privatekey"])
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if key.Curve != elliptic.P521() {
		t.Errorf("curve %s, want P-521", key.Curve.Params().Name)
	}
	pub := string(s.Data["ssh-publickey"])
	fields := strings.Fields(pub)
	if len(fields) != 2 || fields[0] != "ecdsa-sha2-nistp521" || !strings.HasSuffix(pub, "\n") {
		t.Fatalf("ssh-publickey %q, want one authorized_keys line of type ecdsa-sha2-nistp521", pub)
	}
	wire, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	got := sshStrings(t, wire)
	ek, err := key.PublicKey.ECDH()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{[]byte("ecdsa-sha2-nistp521"), []byte("nistp521"), ek.Bytes()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("public key wire form (-want +got):\n%s", diff)
	}

	// Two Secrets never share a key.
	other := &corev1.Secret{}
	if err := runtime.FillSSHKeys(other); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.Data["ssh-publickey"], s.Data["ssh-publickey"]) {
		t.Error("two calls made the same key")
	}
	if err := runtime.FillSSHKeys(&corev1.ConfigMap{}); err == nil {
		t.Error("FillSSHKeys on a ConfigMap: no error")
	}
}

// TestSSHKeysReadByOpenSSH: ssh-keygen derives our public key from our private
// key file, so ssh and sshd accept the pair.
func TestSSHKeysReadByOpenSSH(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	prereq.Require(t, err == nil, "ssh-keygen not installed (Debian's openssh-client; `make debian-packages` installs it)")
	s := &corev1.Secret{}
	if err := runtime.FillSSHKeys(s); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_rsa")
	if err := os.WriteFile(path, s.Data["ssh-privatekey"], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(keygen, "-y", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen -y: %v\n%s", err, out)
	}
	if diff := cmp.Diff(string(s.Data["ssh-publickey"]), string(out)); diff != "" {
		t.Errorf("public key OpenSSH derives (-ours +ssh-keygen):\n%s", diff)
	}
}
