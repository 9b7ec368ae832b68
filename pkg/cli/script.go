package cli

import (
	"fmt"
	"path/filepath"
	"strings"
)

// scriptDelimiter ends the here-document that carries a script; a suffix is
// added when the script itself has a line like it.
const scriptDelimiter = "TRAINYARD_SCRIPT_EOF"

// ScriptCommand is the container command that runs a local script on every node,
// as the SDK ships a function: the script travels inside the command (no
// ConfigMap, no image build), `bash -c` writes it to a fresh temporary directory
// under its own file name and runs it with the runtime's entrypoint, torchrun for
// torch runtimes (which reads the PET_* environment Trainyard injects, so it needs
// no flags) and python3 otherwise; args are passed to the script.
//
// Unlike the SDK, the here-document is quoted (bash expands nothing in the
// script), the entrypoint is exec'd (it gets the container's signals), and "$" is
// escaped where the kubelet would otherwise expand $(VAR) or $$ in the command.
func ScriptCommand(entrypoint, path string, script []byte, args []string) ([]string, error) {
	name := filepath.Base(path)
	if name == "." || name == "/" || name == "" {
		return nil, fmt.Errorf("script %q: not a file name", path)
	}
	body := string(script)
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	delim := scriptDelimiter
	for i := 1; hasLine(body, delim); i++ {
		delim = fmt.Sprintf("%s_%d", scriptDelimiter, i)
	}
	file := `"$dir"/` + ShellQuote(name)
	var b strings.Builder
	b.WriteString("set -e\n")
	b.WriteString(`dir=$(mktemp -d "${TMPDIR:-/tmp}/trainyard.XXXXXX")` + "\n")
	fmt.Fprintf(&b, "cat > %s <<'%s'\n%s%s\n", file, delim, body, delim)
	fmt.Fprintf(&b, "exec %s %s \"$@\"\n", entrypoint, file)
	// bash -c SCRIPT NAME ARGS...: NAME is $0, ARGS are "$@".
	cmd := []string{"bash", "-c", EscapeKubeletExpansion(b.String()), name}
	for _, a := range args {
		cmd = append(cmd, EscapeKubeletExpansion(a))
	}
	return cmd, nil
}

func hasLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/+=:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// EscapeKubeletExpansion escapes s so that the kubelet's expansion of a
// container's command and args ($(VAR) by the variable, $$ by $) gives s back:
// every "$" followed by "$" or "(" is doubled.
func EscapeKubeletExpansion(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == '$' && i+1 < len(s) && (s[i+1] == '$' || s[i+1] == '(') {
			b.WriteByte('$')
		}
	}
	return b.String()
}
