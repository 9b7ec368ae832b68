package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/pkg/processnode"
	"github.com/trainyard/trainyard/test/prereq"
)

func TestScriptCommand(t *testing.T) {
	got, err := ScriptCommand("torchrun", "examples/mnist/mnist.py", []byte("print(1)\n"), []string{"--steps", "10"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bash", "-c", `set -e
dir=$$(mktemp -d "${TMPDIR:-/tmp}/trainyard.XXXXXX")
cat > "$dir"/mnist.py <<'TRAINYARD_SCRIPT_EOF'
print(1)
TRAINYARD_SCRIPT_EOF
exec torchrun "$dir"/mnist.py "$@"
`, "mnist.py", "--steps", "10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScriptCommand (-want +got):\n%s", diff)
	}
	if _, err := ScriptCommand("python3", "/", nil, nil); err == nil {
		t.Error("ScriptCommand accepted / as a script")
	}
}

func TestEscapeKubeletExpansion(t *testing.T) {
	cases := map[string]string{
		"":                  "",
		"plain":             "plain",
		"$HOME and ${HOME}": "$HOME and ${HOME}",
		"$(HOME)":           "$$(HOME)",
		"$$":                "$$$",
		"$$(X)":             "$$$$(X)",
		"end$":              "end$",
		"a$(b)$c$$":         "a$$(b)$c$$$",
	}
	// Whatever the kubelet defines, expanding the escaped string gives s back.
	defined := func(string) (string, bool) { return "EXPANDED", true }
	for in, want := range cases {
		got := EscapeKubeletExpansion(in)
		if got != want {
			t.Errorf("EscapeKubeletExpansion(%q) = %q, want %q", in, got, want)
		}
		if back := processnode.Expand(got, defined); back != in {
			t.Errorf("kubelet expansion of %q = %q, want %q", got, back, in)
		}
	}
}

// The command really recreates the script byte for byte and passes the arguments,
// after the kubelet's expansion, whatever the script holds: shell syntax, $(VAR),
// quotes, the here-document delimiter itself, no final newline.
func TestScriptCommandRunsInBash(t *testing.T) {
	_, err := exec.LookPath("bash")
	prereq.Require(t, err == nil, "no bash on PATH")
	cases := []struct {
		name, file, script string
		args               []string
	}{
		{name: "python", file: "train.py", script: "import os\nprint(f\"{os.environ['HOME']}\")\n", args: []string{"--lr", "0.1"}},
		{name: "shell syntax is not expanded", file: "x.py", script: "s = '$(HOME) $$ ${PATH} `id` \\\\ \" \\''\n"},
		{name: "delimiter inside", file: "d.py", script: "a = '''\nTRAINYARD_SCRIPT_EOF\nTRAINYARD_SCRIPT_EOF_1\n'''\n"},
		{name: "no final newline", file: "n.py", script: "print(1)"},
		{name: "file name needing quotes", file: "dir/my script's.py", script: "pass\n", args: []string{"a b", "$(X)", "'"}},
	}
	// The entrypoint prints the file it got, then each argument in <>.
	entry := `sh -c 'cat "$0"; for a in "$@"; do printf "<%s>" "$a"; done'`
	tmp := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := ScriptCommand(entry, tc.file, []byte(tc.script), tc.args)
			if err != nil {
				t.Fatal(err)
			}
			lookup := processnode.EnvLookup([]string{"HOME=/kubelet", "X=kubelet"})
			argv := make([]string, len(cmd))
			for i, a := range cmd {
				argv[i] = processnode.Expand(a, lookup)
			}
			c := exec.Command(argv[0], argv[1:]...)
			c.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp}
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", argv, err, out)
			}
			want := tc.script
			if !strings.HasSuffix(want, "\n") {
				want += "\n"
			}
			for _, a := range tc.args {
				want += "<" + a + ">"
			}
			if diff := cmp.Diff(want, string(out)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			files, _ := filepath.Glob(filepath.Join(tmp, "trainyard.*", filepath.Base(tc.file)))
			if len(files) != 1 {
				t.Errorf("script files written: %v, want one under %s", files, tmp)
			}
		})
	}
}
