// Command trainyard-images builds the manager's and the initializer's images,
// and the training images (torch, mpi, xgboost: Debian packages on a
// debootstrap rootfs), as OCI image archives without a container engine
// (package pkg/images); `make images` runs it:
//
//	trainyard-images -out bin/images -version V -commit C -source-date-epoch S -ldflags "-X ..."
//
// It prints one line per image (name, archive, size, digest), and rebuilds
// nothing when the inputs are those of the last build in -out. The training
// images need root, debootstrap and the Debian mirror (for a package list not
// yet in -cache); -training=false leaves them out. Import an archive with
// `ctr images import bin/images/trainyard-manager.oci.tar`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/pkg/images"
)

func main() {
	var opts images.Options
	flag.StringVar(&opts.RepoRoot, "repo", ".", "root of the Trainyard repository")
	flag.StringVar(&opts.OutDir, "out", "bin/images", "directory of the archives")
	flag.StringVar(&opts.Version, "version", "dev", "version: the images' tag and org.opencontainers.image.version")
	flag.StringVar(&opts.GitCommit, "commit", "", "commit: org.opencontainers.image.revision")
	flag.StringVar(&opts.LDFlags, "ldflags", "", "linker flags that stamp pkg/version (the Makefile's LDFLAGS); -s -w is prepended")
	flag.Int64Var(&opts.SourceDateEpoch, "source-date-epoch", 0, "time of every file and config, in seconds (SOURCE_DATE_EPOCH)")
	flag.StringVar(&opts.GOARCH, "arch", "", "GOARCH of the images (default: this machine's)")
	flag.StringVar(&opts.CacheDir, "cache", "", "directory of the training images' rootfs, downloads and layers (default: <out>/cache)")
	training := flag.Bool("training", true, "also build the training images (root, debootstrap)")
	verbose := flag.Bool("v", false, "print each step")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *verbose {
		opts.Log = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	start := time.Now()
	results, upToDate, err := images.Build(ctx, opts)
	if err == nil && *training {
		var more []images.Result
		var trainingUpToDate bool
		more, trainingUpToDate, err = images.BuildTraining(ctx, opts)
		results, upToDate = append(results, more...), upToDate && trainingUpToDate
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-images:", err)
		os.Exit(1)
	}
	state := fmt.Sprintf("built in %s", time.Since(start).Round(100*time.Millisecond))
	if upToDate {
		state = "up to date"
	}
	wd, _ := os.Getwd()
	for _, r := range results {
		path := r.Path
		if rel, err := filepath.Rel(wd, r.Path); err == nil && !strings.HasPrefix(rel, "..") {
			path = rel
		}
		fmt.Printf("%s  %s  %.1f MiB  %s\n", path, r.Ref, float64(r.Size)/(1<<20), r.Digest)
	}
	fmt.Printf("images %s\n", state)
}
