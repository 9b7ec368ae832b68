package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/trainyard/trainyard/pkg/version"
)

// envRunMain makes the test binary run Main on its arguments instead of the
// tests (TestMain), so that tests can run it as the trainyard program, under
// the name of a link to it.
const envRunMain = "TRAINYARD_CLI_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// programDir is a directory with links to the test binary under the names
// given, which run Main (envRunMain must be set in their environment).
func programDir(t *testing.T, names ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range names {
		if err := os.Symlink(exe, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bashCompletion is a bash program that loads the completion script $1 and
// completes each of the following arguments, a command line up to the cursor,
// printing COMPREPLY, one line per word, after a line "> LINE". The script
// needs bash-completion's _get_comp_words_by_ref, which is defined here, as
// bash-completion splits the words where there is no ':' or '=' in them.
const bashCompletion = `
_get_comp_words_by_ref() {
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	words=("${COMP_WORDS[@]}")
	cword=$COMP_CWORD
}
source "$1"
shift
for line in "$@"; do
	COMP_LINE=$line
	COMP_POINT=${#line}
	read -r -a COMP_WORDS <<< "$line"
	[[ $line == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
	COMPREPLY=()
	__start_trainyard
	echo "> $line"
	printf '%s\n' "${COMPREPLY[@]}"
done
`

// TestBashCompletion loads `trainyard completion bash` in bash and completes
// command lines as bash does on TAB: the completion function of the script
// runs the program (here the test binary as trainyard, on the PATH) for
// cobra's __complete. Without bash the test fails: CI has bash.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("this test drives bash's completion and needs bash: %v", err)
	}
	code, script, errOut := newFakeCluster(t).run("completion", "bash")
	if code != ExitOK || !strings.Contains(script, "complete -o default -F __start_trainyard trainyard") {
		t.Fatalf("completion bash: exit %d, stderr %q:\n%s", code, errOut, script)
	}
	dir := programDir(t, "trainyard")
	scriptFile := filepath.Join(dir, "trainyard.bash")
	if err := os.WriteFile(scriptFile, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", bashCompletion, "bash", scriptFile,
		"trainyard tr", "trainyard -n team-a wai", "trainyard completion f", "trainyard get --kind pytorch", "trainyard wait x --for Comp")
	cmd.Env = append(os.Environ(), envRunMain+"=1", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+filepath.Join(dir, "no-kubeconfig"))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash: %v\n%s%s", err, out.String(), stderr.String())
	}
	want := `> trainyard tr
train
> trainyard -n team-a wai
wait
> trainyard completion f
fish
> trainyard get --kind pytorch
pytorchjob
> trainyard wait x --for Comp
Complete
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("completions (-want +got):\n%s\nstderr: %s", diff, stderr.String())
	}
}

// Run as kubectl-trainyard, the program calls itself `kubectl trainyard`; run
// as kubectl_complete-trainyard, it completes for kubectl.
func TestKubectlPluginNames(t *testing.T) {
	for argv0, want := range map[string]string{
		"trainyard": "trainyard", "/usr/local/bin/trainyard": "trainyard", "cli.test": "trainyard",
		"/home/me/bin/kubectl-trainyard": "kubectl trainyard", "kubectl-trainyard.exe": "kubectl trainyard",
		"kubectl_complete-trainyard": "kubectl trainyard", "kubectl-ml-train_yard": "kubectl ml train-yard", "kubectl-": "trainyard",
	} {
		if got := ProgramName(argv0); got != want {
			t.Errorf("ProgramName(%q) = %q, want %q", argv0, got, want)
		}
	}

	dir := programDir(t, "kubectl-trainyard", "kubectl_complete-trainyard")
	runAs := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, name), args...)
		cmd.Env = append(os.Environ(), envRunMain+"=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	help := runAs("kubectl-trainyard", "get", "--help")
	for _, want := range []string{"Usage:\n  kubectl trainyard get [[KIND/]NAME", "\n  kubectl trainyard get --kind pytorchjob\n", `Use "kubectl trainyard options"`} {
		if !strings.Contains(help, want) {
			t.Errorf("kubectl-trainyard get --help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "\n  trainyard ") {
		t.Errorf("kubectl-trainyard get --help shows a bare trainyard command:\n%s", help)
	}
	// kubectl runs kubectl_complete-trainyard with the words after `kubectl trainyard`.
	if got := runAs("kubectl_complete-trainyard", "tr"); !strings.HasPrefix(got, "train\t") || !strings.HasSuffix(got, "\n:4\n") {
		t.Errorf("kubectl_complete-trainyard tr printed %q, want train and directive 4 (no files)", got)
	}

	// In the plugin's own hints too.
	f := newFakeCluster(t, catalog()...)
	var out, errOut bytes.Buffer
	e := &env{name: "kubectl trainyard", stdout: &out, stderr: &errOut}
	e.connect = func() (*Clients, error) { return &Clients{Client: f.c, Namespace: "ns"}, nil }
	if code := run(context.Background(), e, []string{"train", "--name", "hint", "--", "true"}); code != ExitOK ||
		!strings.Contains(errOut.String(), "follow it with: kubectl trainyard logs -f hint") {
		t.Errorf("train as a plugin: exit %d, stderr %q", code, errOut.String())
	}
}

// The connection flags, anywhere on the line, reach the REST config: cluster,
// credentials, impersonation, timeout and namespace.
func TestConnectionFlagsReachRESTConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://from-kubeconfig.test:6443"}
users:
- name: u
  user: {token: from-kubeconfig}
contexts:
- name: first
  context: {cluster: c, user: u, namespace: first-ns}
- name: second
  context: {cluster: c, user: u, namespace: second-ns}
current-context: first
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", filepath.Join(dir, "elsewhere")) // --kubeconfig wins
	t.Setenv("KUBERNETES_SERVICE_HOST", "")                 // not in a pod, whatever runs the test

	// connectVia runs args with a connect that reports the REST config and
	// namespace the flags give, and stops there.
	errStop := errors.New("stop")
	connectVia := func(args ...string) (*rest.Config, string, error) {
		t.Helper()
		var cfg *rest.Config
		var ns string
		var connectErr error
		e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
		e.connect = func() (*Clients, error) {
			cfg, ns, connectErr = RESTConfig(e.kube)
			return nil, errStop
		}
		if code := run(context.Background(), e, args); code != ExitFailed {
			t.Fatalf("%q: exit %d, want %d from the stopped connect", args, code, ExitFailed)
		}
		return cfg, ns, connectErr
	}

	cfg, ns, err := connectVia("--kubeconfig", kubeconfig, "--as", "alice", "get", "--as-group", "ml", "--as-group", "ops",
		"--token", "secret", "--server", "https://override.test:443", "--request-timeout", "7s", "-n", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.Host, cfg.BearerToken, cfg.Impersonate.UserName, strings.Join(cfg.Impersonate.Groups, ","), cfg.Timeout.String(), ns}
	if diff := cmp.Diff([]string{"https://override.test:443", "secret", "alice", "ml,ops", "7s", "team-a"}, got); diff != "" {
		t.Errorf("host, token, as, as-group, timeout, namespace (-want +got):\n%s", diff)
	}

	// Without them, the kubeconfig's current context; --context picks another.
	cfg, ns, err = connectVia("wait", "x", "--kubeconfig", kubeconfig)
	if err != nil || cfg.Host != "https://from-kubeconfig.test:6443" || cfg.BearerToken != "from-kubeconfig" || cfg.Timeout != 0 || ns != "first-ns" {
		t.Errorf("kubeconfig alone: %v, host %q, token %q, timeout %s, namespace %q", err, cfg.Host, cfg.BearerToken, cfg.Timeout, ns)
	}
	if _, ns, err = connectVia("--context", "second", "events", "x", "--kubeconfig", kubeconfig); err != nil || ns != "second-ns" {
		t.Errorf("--context second: %v, namespace %q, want second-ns", err, ns)
	}

	// No configuration anywhere is an error, not http://localhost:8080 as with kubectl.
	t.Setenv("HOME", dir)
	if _, _, err = connectVia("get"); err == nil || !strings.Contains(err.Error(), "no configuration has been provided") {
		t.Errorf("without a kubeconfig: %v, want no configuration", err)
	}
	if cfg, _, err = connectVia("get", "--server", "https://only-server.test"); err != nil || cfg.Host != "https://only-server.test" {
		t.Errorf("--server alone: %v, %+v", err, cfg)
	}
}

func TestRootCommandLine(t *testing.T) {
	f := newFakeCluster(t)
	code, out, errOut := f.run("--version")
	if code != ExitOK || out != version.Get().String()+"\n" || errOut != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want the client's version", code, out, errOut)
	}

	for _, args := range [][]string{{"frobnicate"}, {"-n", "x", "tr"}, {"get", "--bogus"}, {"--bogus"}, {"completion", "tcsh"}, {"options", "x"}} {
		code, out, errOut := f.run(args...)
		if code != ExitUsage || out != "" || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, "\nUsage:\n") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, an error and the usage on stderr", args, code, out, errOut, ExitUsage)
		}
	}
	if _, _, errOut := f.run("tr"); !strings.Contains(errOut, `unknown command "tr" for "trainyard"; did you mean train?`) {
		t.Errorf("tr: %s", errOut)
	}

	// Every command explains itself with examples; options lists the connection flags.
	for _, c := range []string{"runtimes", "train", "get", "logs", "wait", "events", "delete", "version", "completion", "options"} {
		code, out, _ := f.run(c, "--help")
		if code != ExitOK || !strings.Contains(out, "\nUsage:\n  trainyard "+c) || !strings.Contains(out, "\nExamples:\n  # ") {
			t.Errorf("%s --help: exit %d:\n%s", c, code, out)
		}
	}
	code, out, _ = f.run("options")
	for _, flag := range []string{"--kubeconfig", "--context", "-n, --namespace", "--as ", "--as-group", "--token", "--server", "--request-timeout", "--certificate-authority", "--insecure-skip-tls-verify"} {
		if code != ExitOK || !strings.Contains(out, flag) {
			t.Errorf("options: exit %d, lacks %s:\n%s", code, flag, out)
		}
	}
}
