package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// The training images are what the pods of the local runtimes run on a
// container node: Debian's own builds of PyTorch, OpenMPI and XGBoost (the
// versions the process node's pods use from the host), on a Debian rootfs made
// with debootstrap. Every training image is two layers: one base (debootstrap's
// minbase with Python and NumPy), the same bytes in every image, and the
// packages of the image, installed with apt-get over the base. The rootfs of
// each is cached under Options.CacheDir, keyed on the suite, the mirror and the
// package lists, so that only a new package list runs debootstrap or apt again.
//
// The suite is pinned; the package versions are those of the mirror on the day
// of the build, so every image records them: the label
// org.trainyard.debian.packages (the versions of the packages it names) and the
// file ManifestPath (every package of the image, as dpkg lists them). Nothing
// of Trainyard is in them, so neither its version nor SOURCE_DATE_EPOCH is:
// every time in them is TrainingCreated, and a new commit rebuilds none.
const (
	Suite  = "bookworm"
	Mirror = "http://deb.debian.org/debian"
	// TrainingTag is the tag of every training image: their content follows
	// the Debian suite, not Trainyard's version, so runtimes can name them.
	TrainingTag = Suite
	// ManifestPath is the image's package list: "name version" per line.
	ManifestPath = "/usr/share/trainyard/packages.txt"
	// PackagesLabel holds "name=version" of the packages the image names.
	PackagesLabel = "org.trainyard.debian.packages"
	// MPIUser is the user of the MPI image, as in Kubeflow's MPI images
	// (mpiuser, 1000, home /home/mpiuser) that the MPI runtimes are written for.
	MPIUser = "mpiuser"
	// SSHPort is the port of the MPI image's sshd and of its ssh client.
	SSHPort = 2222
)

// TrainingCreated is the time of every file, layer and config of the
// training images.
var TrainingCreated = time.Unix(0, 0).UTC()

// BasePackages are debootstrap's additions to minbase: the base layer shared
// by every training image.
var BasePackages = []string{"ca-certificates", "python3", "python3-numpy"}

// TrainingImage is one training image: the packages apt installs over the
// base, a script run in the image's rootfs after them (as root, with /bin/sh),
// and its config.
type TrainingImage struct {
	Name     string
	Packages []string
	Setup    string
	User     string
	WorkDir  string
	Env      []string
	Cmd      []string
}

// TrainingImages are the images BuildTraining makes.
var TrainingImages = []TrainingImage{
	{
		// Fashion-MNIST is there extracted as torchvision wants it in
		// ./data/FashionMNIST/raw of the working directory: Debian's .gz
		// files do not match torchvision's checksums, so with only those,
		// datasets.FashionMNIST(download=True) would try the network.
		Name:     "torch",
		Packages: []string{"python3-torch", "python3-torchvision", "dataset-fashion-mnist"},
		Setup: `set -e
mkdir -p /workspace/data/FashionMNIST/raw
for f in /usr/share/datasets/fashion-mnist/*.gz; do
	gzip -dc "$f" > "/workspace/data/FashionMNIST/raw/$(basename "$f" .gz)"
done
`,
		User:    "0:0",
		WorkDir: "/workspace",
		// Debian's torch 1.13 on Python 3.11 crashes in torchrun unless
		// PET_REDIRECTS and PET_TEE are set (the process node sets the same
		// for the host's torch); with both, the workers' output still reaches
		// the container's log.
		Env: []string{"PET_REDIRECTS=1", "PET_TEE=1", "PYTHONUNBUFFERED=1"},
		Cmd: []string{"python3"},
	},
	{
		// The MPI runtimes run sshd as the image's user on port 2222 with
		// the config in its home (sshd -De -f /home/mpiuser/.sshd_config), and
		// mount the TrainJob's key pair at /home/mpiuser/.ssh, owned by root
		// and readable by the pod's fsGroup: so the host key belongs to
		// mpiuser, StrictModes is off and PAM is not used. The client side
		// (mpirun's ssh) connects to port 2222 and keeps no known_hosts, since
		// .ssh is a read-only Secret. /run/sshd is there for a root sshd.
		Name:     "mpi",
		Packages: []string{"openmpi-bin", "openssh-server", "openssh-client", "python3-mpi4py"},
		Setup: fmt.Sprintf(`set -e
useradd --create-home --uid 1000 --user-group --shell /bin/bash %[1]s
mkdir -p /run/sshd /home/%[1]s/.sshd
chmod 0755 /run/sshd
ssh-keygen -q -t ed25519 -N '' -C '' -f /home/%[1]s/.sshd/ssh_host_ed25519_key
cat > /home/%[1]s/.sshd_config <<EOF
Port %[2]d
HostKey /home/%[1]s/.sshd/ssh_host_ed25519_key
AuthorizedKeysFile /home/%[1]s/.ssh/authorized_keys
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
EOF
cat > /etc/ssh/ssh_config.d/trainyard.conf <<EOF
Host *
    Port %[2]d
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
EOF
chown -R %[1]s:%[1]s /home/%[1]s
`, MPIUser, SSHPort),
		User:    "1000:1000",
		WorkDir: "/home/" + MPIUser,
		Env:     []string{"PYTHONUNBUFFERED=1"},
		Cmd:     []string{"/usr/sbin/sshd", "-De", "-f", "/home/" + MPIUser + "/.sshd_config"},
	},
	{
		// scikit-learn for its bundled data sets, which the XGBoost example
		// trains on.
		Name:     "xgboost",
		Packages: []string{"python3-xgboost", "python3-sklearn"},
		User:     "0:0",
		WorkDir:  "/workspace",
		Setup:    "mkdir -p /workspace\n",
		Env:      []string{"PYTHONUNBUFFERED=1"},
		Cmd:      []string{"python3"},
	},
}

// TrainingEnv is the environment every training image starts with.
var TrainingEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}

// Ref is the image's local name: trainyard.local/<name>:bookworm.
func (ti TrainingImage) Ref() string { return Registry + "/" + ti.Name + ":" + TrainingTag }

// BuildTraining writes an OCI image archive per image of TrainingImages into
// opts.OutDir (<name>.oci.tar), each rebuilt only when its stamp (the package
// lists, the setup, the options and this package's layer format) changes. It
// needs root and debootstrap, and apt's mirror for a package list not yet in
// opts.CacheDir. The second return is true when nothing was rebuilt.
func BuildTraining(ctx context.Context, opts Options) ([]Result, bool, error) {
	if opts.OutDir == "" {
		return nil, false, errors.New("images: OutDir is required")
	}
	if opts.GOARCH == "" {
		opts.GOARCH = runtime.GOARCH
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(opts.OutDir, "cache")
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, false, err
	}
	created := TrainingCreated
	deb := debian{cache: opts.CacheDir, logf: opts.logf}
	var results []Result
	upToDate := true
	for _, ti := range TrainingImages {
		stamp := ti.stamp(opts)
		path := ArchivePath(opts.OutDir, ti.Name)
		stampFile := filepath.Join(opts.OutDir, "."+ti.Name+".stamp")
		if b, err := os.ReadFile(stampFile); err == nil && string(b) == stamp {
			if r, err := readResult(path, ti.Ref()); err == nil {
				r.Image = Image{Name: ti.Name}
				results = append(results, r)
				continue
			}
		}
		upToDate = false
		_ = os.Remove(stampFile)
		start := time.Now()
		r, err := ti.build(ctx, opts, deb, created, path)
		if err != nil {
			return nil, false, fmt.Errorf("image %s: %w", ti.Name, err)
		}
		opts.logf("wrote %s (%s, %s) in %s", r.Path, r.Ref, mib(r.Size), time.Since(start).Round(100*time.Millisecond))
		if err := os.WriteFile(stampFile, []byte(stamp), 0o644); err != nil {
			return nil, false, err
		}
		results = append(results, r)
	}
	return results, upToDate, nil
}

// stamp is what the image's archive is built from.
func (ti TrainingImage) stamp(opts Options) string {
	h := sha256.New()
	fmt.Fprintf(h, "layers=%s\nbase=%s\nrootfs=%s\narch=%s\nconfig=%q %q %q %q %q %q\n",
		layerFormat, baseKey(), ti.key(), opts.GOARCH, ti.User, ti.WorkDir, ti.Env, ti.Cmd, TrainingEnv, Source)
	return hex.EncodeToString(h.Sum(nil))
}

func (ti TrainingImage) build(ctx context.Context, opts Options, deb debian, created time.Time, path string) (Result, error) {
	base, err := deb.base(ctx)
	if err != nil {
		return Result{}, err
	}
	rootfs, err := deb.image(ctx, base, ti)
	if err != nil {
		return Result{}, err
	}
	baseLayer, err := deb.layer(base, created)
	if err != nil {
		return Result{}, err
	}
	imageLayer, err := deb.layer(rootfs, created)
	if err != nil {
		return Result{}, err
	}
	packages, err := os.ReadFile(filepath.Join(rootfs.dir, ManifestPath))
	if err != nil {
		return Result{}, fmt.Errorf("the package manifest: %w", err)
	}
	img, err := ti.assemble(opts, created, packageLabel(string(packages), ti.Packages), baseLayer, imageLayer)
	if err != nil {
		return Result{}, err
	}
	r := Result{Image: Image{Name: ti.Name}, Ref: ti.Ref(), Path: path}
	r.Digest, r.Size, err = writeArchive(img, r.Ref, path, created)
	return r, err
}

func (ti TrainingImage) assemble(opts Options, created time.Time, packages string, base, layer v1.Layer) (v1.Image, error) {
	cfg := &v1.ConfigFile{
		Architecture: opts.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       ti.User,
			WorkingDir: ti.WorkDir,
			Env:        append(append([]string{}, TrainingEnv...), ti.Env...),
			Cmd:        ti.Cmd,
			Labels: map[string]string{
				"org.opencontainers.image.title":     ti.Name,
				"org.opencontainers.image.source":    Source,
				"org.opencontainers.image.base.name": "debian:" + Suite + " (debootstrap --variant=minbase " + Mirror + ")",
				PackagesLabel:                        packages,
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	history := func(by string) v1.History { return v1.History{Created: v1.Time{Time: created}, CreatedBy: by} }
	return newImage(cfg,
		mutate.Addendum{Layer: base,
			History: history("debootstrap --variant=minbase --include=" + strings.Join(BasePackages, ",") + " " + Suite)},
		mutate.Addendum{Layer: layer,
			History: history("apt-get install --no-install-recommends " + strings.Join(ti.Packages, " "))})
}

// packageLabel is "name=version" of each named package, from the manifest's
// "name version" lines, in the order named.
func packageLabel(manifest string, named []string) string {
	versions := map[string]string{}
	for _, line := range strings.Split(manifest, "\n") {
		if name, version, ok := strings.Cut(line, " "); ok {
			versions[name] = version
		}
	}
	var out []string
	for _, p := range named {
		out = append(out, p+"="+versions[p])
	}
	return strings.Join(out, " ")
}

func (o Options) logf(format string, a ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", a...)
	}
}
