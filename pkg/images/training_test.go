package images

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/trainyard/trainyard/test/prereq"
)

// trainingOptions build into a temporary directory, with the rootfs cache of
// `make images` (bin/images/cache), so that a machine that ran one does not
// run debootstrap and apt again for the other.
func trainingOptions(t *testing.T) Options {
	opts := testOptions(t, t.TempDir())
	opts.CacheDir = filepath.Join(opts.RepoRoot, "bin", "images", "cache")
	return opts
}

// wantFiles are files each training image must hold for its runtimes'
// commands: the programs, the Python modules' packages, the data.
var wantFiles = map[string][]string{
	"torch": {
		"/usr/bin/python3", "/usr/bin/torchrun",
		"/usr/lib/python3/dist-packages/torch/__init__.py",
		"/usr/lib/python3/dist-packages/torchvision/__init__.py",
		"/usr/lib/python3/dist-packages/numpy/__init__.py",
	},
	"mpi": {
		"/usr/bin/mpirun", "/usr/bin/orted", "/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen",
		"/usr/bin/python3", "/usr/lib/python3/dist-packages/mpi4py/__init__.py",
		"/home/mpiuser/.sshd_config", "/home/mpiuser/.sshd/ssh_host_ed25519_key", "/etc/ssh/ssh_config.d/trainyard.conf",
	},
	"xgboost": {
		"/usr/bin/python3",
		"/usr/lib/python3/dist-packages/xgboost/__init__.py",
		"/usr/lib/python3/dist-packages/sklearn/__init__.py",
		"/usr/lib/python3/dist-packages/numpy/__init__.py",
	},
}

// fashionMNIST are the sizes of the extracted Fashion-MNIST files (IDX:
// 16- or 8-byte header, then 28x28 images or one label per example).
var fashionMNIST = map[string]int64{
	"train-images-idx3-ubyte": 16 + 60000*784, "train-labels-idx1-ubyte": 8 + 60000,
	"t10k-images-idx3-ubyte": 16 + 10000*784, "t10k-labels-idx1-ubyte": 8 + 10000,
}

// TestTrainingImages builds the training images (debootstrap, apt-get; the
// cache of bin/images/cache makes a second run cheap) and reads each back:
// its name, config and labels, the files its runtimes' commands need, that
// the base layer is shared, that what no image keeps is gone; then that a
// second build is skipped.
func TestTrainingImages(t *testing.T) {
	prereq.Require(t, os.Geteuid() == 0, "building the training images needs root (debootstrap, chroot, overlayfs)")
	_, err := exec.LookPath("debootstrap")
	prereq.Require(t, err == nil, "debootstrap is not installed: run pkg/localcluster/packages/debian-packages.sh (apt-get install debootstrap)")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	opts := trainingOptions(t)
	results, _, err := BuildTraining(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var bases []v1.Hash
	for _, r := range results {
		names = append(names, r.Name)
		t.Run(r.Name, func(t *testing.T) {
			ti := TrainingImages[slices.IndexFunc(TrainingImages, func(ti TrainingImage) bool { return ti.Name == r.Name })]
			desc, img := readImage(t, r.Path)
			if desc.Digest != r.Digest || desc.Annotations[annotationContainerdRef] != "trainyard.local/"+r.Name+":bookworm" {
				t.Errorf("index entry %s %v, want %s named trainyard.local/%s:bookworm", desc.Digest, desc.Annotations, r.Digest, r.Name)
			}
			layers := layerDigests(t, r.Path)
			if len(layers) != 2 {
				t.Fatalf("%d layers, want the base and the image's", len(layers))
			}
			bases = append(bases, layers[0])
			checkTrainingConfig(t, img, ti)
			checkTrainingFiles(t, img, ti)
		})
	}
	if diff := cmp.Diff([]string{"torch", "mpi", "xgboost"}, names); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	for _, b := range bases[1:] {
		if b != bases[0] {
			t.Errorf("base layers differ: %s and %s", bases[0], b)
		}
	}
	again, upToDate, err := BuildTraining(ctx, opts)
	checkSkipped(t, results, again, upToDate, err)
}

func checkTrainingConfig(t *testing.T, img v1.Image, ti TrainingImage) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	want := map[string]string{"torch": "0:0", "mpi": "1000:1000", "xgboost": "0:0"}[ti.Name]
	if c.User != want || c.User != ti.User {
		t.Errorf("User %q, want %q", c.User, want)
	}
	if c.WorkingDir != ti.WorkDir || len(c.Entrypoint) != 0 || !slices.Equal(c.Cmd, ti.Cmd) {
		t.Errorf("WorkingDir %q Entrypoint %q Cmd %q, want %q, none, %q", c.WorkingDir, c.Entrypoint, c.Cmd, ti.WorkDir, ti.Cmd)
	}
	if ti.Name == "torch" && (!slices.Contains(c.Env, "PET_REDIRECTS=1") || !slices.Contains(c.Env, "PET_TEE=1")) {
		t.Errorf("Env %q lacks PET_REDIRECTS and PET_TEE, without which Debian's torchrun fails", c.Env)
	}
	if !strings.HasPrefix(c.Env[0], "PATH=") || !strings.Contains(c.Env[0], "/usr/sbin") {
		t.Errorf("Env %q: PATH first, with /usr/sbin (sshd)", c.Env)
	}
	if c.Labels["org.opencontainers.image.title"] != ti.Name || c.Labels["org.opencontainers.image.source"] != Source ||
		!strings.HasPrefix(c.Labels["org.opencontainers.image.base.name"], "debian:bookworm ") {
		t.Errorf("labels %v: want the title %s, the source, the base debian:bookworm", c.Labels, ti.Name)
	}
	versions := strings.Fields(c.Labels[PackagesLabel])
	if len(versions) != len(ti.Packages) {
		t.Errorf("label %s %q, want a version of each of %q", PackagesLabel, versions, ti.Packages)
	}
	for i, v := range versions {
		if name, version, _ := strings.Cut(v, "="); name != ti.Packages[i] || version == "" {
			t.Errorf("label %s: %q, want %s=<version>", PackagesLabel, v, ti.Packages[i])
		}
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(TrainingCreated) {
		t.Errorf("%s/%s created %s, want linux/%s at %s", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH, TrainingCreated)
	}
}

// checkTrainingFiles reads the image's flattened file system (whiteouts
// applied) and checks the files its runtimes need and what it must not hold.
func checkTrainingFiles(t *testing.T, img v1.Image, ti TrainingImage) {
	files := map[string]*tar.Header{}
	small := map[string]string{} // the contents of the files checked below
	eachFile(t, img, func(p string, h *tar.Header, r io.Reader) {
		files[p] = h
		if p == ManifestPath || p == "/etc/passwd" || p == "/home/mpiuser/.sshd_config" || p == "/etc/ssh/ssh_config.d/trainyard.conf" {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			small[p] = string(b)
		}
		if strings.HasPrefix(p, "/var/lib/apt/lists/") && !strings.HasSuffix(p, "/partial") && p != "/var/lib/apt/lists/lock" ||
			strings.HasSuffix(p, ".deb") || p == "/etc/resolv.conf" || p == "/usr/sbin/policy-rc.d" || strings.Contains(p, "/.wh.") {
			t.Errorf("%s: the image keeps what it should not (apt's lists or archives, the build's resolv.conf, policy-rc.d, a whiteout)", p)
		}
	})
	for _, p := range wantFiles[ti.Name] {
		if h := files[p]; h == nil || (h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink && h.Typeflag != tar.TypeLink) {
			t.Errorf("%s: missing", p)
		}
	}
	for _, p := range ti.Packages {
		if !strings.Contains(small[ManifestPath], "\n"+p+" ") {
			t.Errorf("%s does not list %s:\n%s", ManifestPath, p, small[ManifestPath])
		}
	}
	switch ti.Name {
	case "torch":
		for name, size := range fashionMNIST {
			p := "/workspace/data/FashionMNIST/raw/" + name
			if h := files[p]; h == nil || h.Size != size {
				t.Errorf("%s: %+v, want %d bytes", p, h, size)
			}
		}
	case "mpi":
		if !strings.Contains(small["/etc/passwd"], "\nmpiuser:x:1000:1000:") {
			t.Errorf("/etc/passwd has no mpiuser 1000:\n%s", small["/etc/passwd"])
		}
		for _, want := range []string{"Port 2222\n", "HostKey /home/mpiuser/.sshd/ssh_host_ed25519_key\n", "StrictModes no\n", "UsePAM no\n",
			"AuthorizedKeysFile /home/mpiuser/.ssh/authorized_keys\n"} {
			if !strings.Contains(small["/home/mpiuser/.sshd_config"], want) {
				t.Errorf("/home/mpiuser/.sshd_config lacks %q:\n%s", want, small["/home/mpiuser/.sshd_config"])
			}
		}
		if !strings.Contains(small["/etc/ssh/ssh_config.d/trainyard.conf"], "Port 2222") {
			t.Errorf("the ssh client does not connect to port 2222:\n%s", small["/etc/ssh/ssh_config.d/trainyard.conf"])
		}
		if h := files["/home/mpiuser/.sshd/ssh_host_ed25519_key"]; h != nil && (h.Uid != 1000 || h.Mode&0o077 != 0) {
			t.Errorf("sshd's host key: owner %d mode %o, want mpiuser's (1000), 0600", h.Uid, h.Mode)
		}
		if h := files["/run/sshd"]; h == nil || h.Typeflag != tar.TypeDir || h.Uid != 0 || h.Mode&0o022 != 0 {
			t.Errorf("/run/sshd: %+v, want root's directory, not group- or world-writable", h)
		}
	}
}
