package runtime

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SSHPublicKeyKey is the Secret key of the public key, an authorized_keys
// line (the kubernetes.io/ssh-auth type defines only the private key's).
const SSHPublicKeyKey = "ssh-publickey"

// sshKeyType is OpenSSH's name of an ECDSA key on the P-521 curve.
const (
	sshKeyType   = "ecdsa-sha2-nistp521"
	sshCurveName = "nistp521"
)

// FillSSHKeys puts a new key pair into the SSH key Secret. It is the Secret's
// plan.Child.BeforeCreate: keys are made once, when the Secret is created.
func FillSSHKeys(obj client.Object) error {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return fmt.Errorf("SSH keys go into a Secret, not a %T", obj)
	}
	priv, pub, err := GenerateSSHKeys(rand.Reader)
	if err != nil {
		return err
	}
	s.Data = map[string][]byte{corev1.SSHAuthPrivateKey: priv, SSHPublicKeyKey: pub}
	return nil
}

// GenerateSSHKeys makes an ECDSA P-521 key pair: the private key PEM-encoded
// ("EC PRIVATE KEY", which OpenSSH reads), the public key as an
// authorized_keys line.
func GenerateSSHKeys(random io.Reader) (priv, pub []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), random)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the SSH key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the SSH private key: %w", err)
	}
	pub, err = AuthorizedKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), pub, nil
}

// AuthorizedKey is the authorized_keys line of a P-521 public key: the key
// type, then base64 of SSH's wire form (RFC 5656 §3.1: the strings
// "ecdsa-sha2-nistp521", "nistp521" and the uncompressed point, each preceded
// by its 32-bit big-endian length).
func AuthorizedKey(key *ecdsa.PublicKey) ([]byte, error) {
	ek, err := key.ECDH()
	if err != nil {
		return nil, fmt.Errorf("encoding the SSH public key: %w", err)
	}
	var wire []byte
	for _, field := range [][]byte{[]byte(sshKeyType), []byte(sshCurveName), ek.Bytes()} {
		wire = binary.BigEndian.AppendUint32(wire, uint32(len(field)))
		wire = append(wire, field...)
	}
	return []byte(sshKeyType + " " + base64.StdEncoding.EncodeToString(wire) + "\n"), nil
}
