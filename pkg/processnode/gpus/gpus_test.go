package gpus

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		out     string
		want    []GPU
		wantErr bool
	}{
		"one H200, as measured": {
			out:  "0, GPU-41325c22-1111-2222-3333-444455556666, NVIDIA H200, 143771 MiB\n",
			want: []GPU{{Index: 0, UUID: "GPU-41325c22-1111-2222-3333-444455556666", Name: "NVIDIA H200", MemoryMiB: 143771}},
		},
		"several, out of order, blank lines and CRLF": {
			out: "\r\n1, GPU-bbb, NVIDIA A100-SXM4-80GB, 81920 MiB\r\n\n0, GPU-aaa, NVIDIA A100-SXM4-80GB, 81920 MiB\r\n",
			want: []GPU{
				{Index: 0, UUID: "GPU-aaa", Name: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920},
				{Index: 1, UUID: "GPU-bbb", Name: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920},
			},
		},
		"a name with a comma": {
			out:  "0, GPU-aaa, Some GPU, rev 2, 1024 MiB",
			want: []GPU{{Index: 0, UUID: "GPU-aaa", Name: "Some GPU, rev 2", MemoryMiB: 1024}},
		},
		"memory without unit, and not available": {
			out: "0, GPU-aaa, X, 2048\n1, GPU-bbb, X, [N/A]",
			want: []GPU{
				{Index: 0, UUID: "GPU-aaa", Name: "X", MemoryMiB: 2048},
				{Index: 1, UUID: "GPU-bbb", Name: "X"},
			},
		},
		"nothing":                {out: "\n", want: nil},
		"too few fields":         {out: "0, GPU-aaa, NVIDIA H200", wantErr: true},
		"index not a number":     {out: "x, GPU-aaa, NVIDIA H200, 1 MiB", wantErr: true},
		"not a GPU UUID":         {out: "0, MIG-aaa, NVIDIA H200, 1 MiB", wantErr: true},
		"memory in another unit": {out: "0, GPU-aaa, NVIDIA H200, 1 GiB", wantErr: true},
		"a UUID twice":           {out: "0, GPU-aaa, X, 1 MiB\n1, GPU-aaa, X, 1 MiB", wantErr: true},
		"nvidia-smi's message":   {out: "No devices were found", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	cases := map[string]struct {
		gpus []GPU
		want map[string]string
	}{
		"none": {},
		"two H200": {
			gpus: []GPU{{UUID: "GPU-a", Name: "NVIDIA H200", MemoryMiB: 143771}, {UUID: "GPU-b", Name: "NVIDIA H200", MemoryMiB: 143771}},
			want: map[string]string{LabelProduct: "NVIDIA-H200", LabelMemory: "143771", LabelCount: "2"},
		},
		"characters a label cannot hold, memory unknown": {
			gpus: []GPU{{UUID: "GPU-a", Name: " Tesla V100 (PCIe) 16GB "}},
			want: map[string]string{LabelProduct: "Tesla-V100-PCIe-16GB", LabelCount: "1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Labels(tc.gpus)); diff != "" {
				t.Errorf("Labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnnotation(t *testing.T) {
	cases := map[string]struct {
		byContainer map[string][]string
		value       string
	}{
		"none":          {byContainer: map[string][]string{}, value: ""},
		"one container": {byContainer: map[string][]string{"node": {"GPU-a", "GPU-b"}}, value: "node=GPU-a,GPU-b"},
		"by name": {
			byContainer: map[string][]string{"trainer": {"GPU-b"}, "init": {"GPU-a"}},
			value:       "init=GPU-a;trainer=GPU-b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := FormatAnnotation(tc.byContainer); got != tc.value {
				t.Errorf("FormatAnnotation = %q, want %q", got, tc.value)
			}
			if diff := cmp.Diff(tc.byContainer, ParseAnnotation(tc.value)); diff != "" {
				t.Errorf("ParseAnnotation (-want +got):\n%s", diff)
			}
		})
	}
	// Containers without GPUs are left out, and what cannot be read is skipped.
	if got := FormatAnnotation(map[string][]string{"cpu": nil, "node": {"GPU-a"}}); got != "node=GPU-a" {
		t.Errorf("FormatAnnotation with a container without GPUs = %q, want node=GPU-a", got)
	}
	if diff := cmp.Diff(map[string][]string{"node": {"GPU-a"}}, ParseAnnotation("junk;=GPU-x;empty=; node=GPU-a")); diff != "" {
		t.Errorf("ParseAnnotation of a damaged value (-want +got):\n%s", diff)
	}
}
