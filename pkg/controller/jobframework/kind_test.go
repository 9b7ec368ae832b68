package jobframework

import (
	"errors"
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// recordingKind is a Kind that records what the manager's setup asks of it.
type recordingKind struct {
	name     string
	disabled bool
	fail     string // the step that fails: "scheme", "controller" or "webhooks"
	calls    *[]string
}

func (k *recordingKind) Name() string { return k.name }
func (k *recordingKind) AddToScheme(*k8sruntime.Scheme) error {
	*k.calls = append(*k.calls, k.name+" scheme")
	return k.err("scheme")
}
func (k *recordingKind) BindFlags(fs *flag.FlagSet) { fs.Bool(k.name+"-flag", false, "") }
func (k *recordingKind) Enabled() bool              { return !k.disabled }
func (k *recordingKind) Validate() error {
	*k.calls = append(*k.calls, k.name+" settings")
	return k.err("settings")
}
func (k *recordingKind) Owned() []client.Object {
	return []client.Object{&corev1.ConfigMap{}}
}
func (k *recordingKind) SetupWithManager(*Manager) error {
	*k.calls = append(*k.calls, k.name+" controller")
	return k.err("controller")
}
func (k *recordingKind) SetupWebhooks(*Manager) error {
	*k.calls = append(*k.calls, k.name+" webhooks")
	return k.err("webhooks")
}
func (k *recordingKind) err(step string) error {
	if k.fail == step {
		return errBoom
	}
	return nil
}

func TestKinds(t *testing.T) {
	var calls []string
	kinds := []Kind{
		&recordingKind{name: "a", calls: &calls},
		&recordingKind{name: "off", disabled: true, calls: &calls},
		&recordingKind{name: "b", calls: &calls},
	}
	m := NewManager(newFakeManager(t), nil)
	if err := AddToScheme(k8sruntime.NewScheme(), kinds); err != nil {
		t.Fatal(err)
	}
	if err := Validate(kinds); err != nil {
		t.Fatal(err)
	}
	if err := SetupControllers(m, kinds); err != nil {
		t.Fatal(err)
	}
	if err := SetupWebhooks(m, kinds); err != nil {
		t.Fatal(err)
	}
	// Every kind's types, disabled or not; a disabled kind nothing else.
	want := []string{"a scheme", "off scheme", "b scheme", "a settings", "b settings", "a controller", "b controller", "a webhooks", "b webhooks"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if got := len(Owned(kinds)); got != 2 {
		t.Errorf("Owned: %d kinds of children, want the 2 of the enabled kinds", got)
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	BindFlags(fs, kinds)
	for _, name := range []string{"a-flag", "off-flag", "b-flag"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s not bound", name)
		}
	}
}

func TestKindsErrors(t *testing.T) {
	cases := map[string]struct {
		run     func(*Manager, []Kind) error
		wantErr string
		want    []string
	}{
		"scheme": {
			run:     func(_ *Manager, ks []Kind) error { return AddToScheme(k8sruntime.NewScheme(), ks) },
			wantErr: "adding bad's types to the scheme: boom",
			want:    []string{"ok scheme", "bad scheme"},
		},
		"settings": {
			run:     func(_ *Manager, ks []Kind) error { return Validate(ks) },
			wantErr: "bad settings: boom",
			want:    []string{"ok settings", "bad settings"},
		},
		"controller": {
			run:     SetupControllers,
			wantErr: "setting up the bad controller: boom",
			want:    []string{"ok controller", "bad controller"},
		},
		"webhooks": {
			run:     SetupWebhooks,
			wantErr: "bad webhooks: boom",
			want:    []string{"ok webhooks", "bad webhooks"},
		},
	}
	for step, tc := range cases {
		t.Run(step, func(t *testing.T) {
			var calls []string
			kinds := []Kind{
				&recordingKind{name: "ok", calls: &calls},
				&recordingKind{name: "bad", fail: step, calls: &calls},
				&recordingKind{name: "after", calls: &calls},
			}
			err := tc.run(NewManager(newFakeManager(t), nil), kinds)
			if !errors.Is(err, errBoom) || err.Error() != tc.wantErr {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}
