package images

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stage is what a final stage of the Dockerfile declares about its image.
type stage struct {
	name, from string
	args       map[string]string // ARG name=default
	workdir    string
	user       string
	entrypoint []string
	expose     []string // as the image config writes them: "8443/tcp"
	env        []string
	labels     map[string]string // with ${ARG} not yet expanded
	copies     map[string]string // destination -> source, of COPY --from=builder
}

// parseDockerfile returns the Dockerfile's stages but the builder, in order.
// It knows the instructions the Dockerfile uses and fails on any other in a
// final stage, so that a new one (ADD, ENV in another form, ...) is noticed
// here rather than silently left out of the images.
func parseDockerfile(t *testing.T) []*stage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []*stage
	var cur *stage
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		instr, rest := strings.ToUpper(fields[0]), strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), fields[0]))
		if instr == "FROM" {
			cur = &stage{from: fields[1], args: map[string]string{}, labels: map[string]string{}, copies: map[string]string{}}
			if len(fields) == 4 && strings.EqualFold(fields[2], "AS") {
				cur.name = fields[3]
			}
			if cur.name != "builder" {
				stages = append(stages, cur)
			}
			continue
		}
		if cur == nil || cur.name == "builder" {
			continue
		}
		switch instr {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			cur.args[k] = v
		case "WORKDIR":
			cur.workdir = rest
		case "USER":
			cur.user = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &cur.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s is not in exec (JSON) form: %v", rest, err)
			}
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				cur.expose = append(cur.expose, p)
			}
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				cur.env = append(cur.env, strings.Trim(kv, `"`))
			}
		case "LABEL":
			for _, kv := range splitQuoted(t, rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("LABEL %s: not key=value", kv)
				}
				cur.labels[k] = v
			}
		case "COPY":
			if len(fields) != 4 || fields[1] != "--from=builder" {
				t.Fatalf("final stage %q: COPY other than `COPY --from=builder SRC DEST`: %s", cur.name, line)
			}
			cur.copies[fields[3]] = fields[2]
		default:
			t.Fatalf("final stage %q: instruction %s is not one the image builder knows: %s", cur.name, instr, line)
		}
	}
	return stages
}

// splitQuoted splits key="value with spaces" pairs on the spaces outside
// double quotes and drops the quotes.
func splitQuoted(t *testing.T, s string) []string {
	var out []string
	var b strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
		default:
			b.WriteRune(r)
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %s", s)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// expand replaces ${NAME} with the build argument's value: args (what the
// builder passes as --build-arg) over the stage's ARG defaults.
func (s *stage) expand(v string, args map[string]string) string {
	return os.Expand(v, func(name string) string {
		if a, ok := args[name]; ok {
			return a
		}
		return s.args[name]
	})
}
