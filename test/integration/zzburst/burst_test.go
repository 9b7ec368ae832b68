package zzburst

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	debug.SetGCPercent(50)
	framework.Main(m, &env, framework.Options{}, func(e *framework.Env) (func(), error) {
		return nil, e.StartManager(framework.ManagerOptions{})
	})
}

func TestBurst(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	f, err := os.Open(framework.RepoRoot() + "/runtimes/torch-distributed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&rt); err != nil {
		t.Fatal(err)
	}
	_ = c.Delete(ctx, &rt)
	rt.ResourceVersion = ""
	if err := c.Create(ctx, &rt); err != nil {
		t.Fatal(err)
	}
	ns := framework.NewNamespace(t, c, "burst")
	n := 1000
	out, _ := os.Create(os.Getenv("PROF"))
	var ru0 = cpuNow()
	_ = pprof.StartCPUProfile(out)
	start := time.Now()
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				j := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("j%04d", i)},
					Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt.Name}, Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2)}}}
				for {
					if err := c.Create(ctx, j); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	submitted := time.Since(start)
	for {
		var l jobsetv1alpha2.JobSetList
		_ = c.List(ctx, &l, client.InNamespace(ns))
		var tl trainer.TrainJobList
		_ = c.List(ctx, &tl, client.InNamespace(ns))
		st := 0
		for _, j := range tl.Items {
			if j.Status.Phase != "" {
				st++
			}
		}
		if len(l.Items) == n && st == n {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	all := time.Since(start)
	pprof.StopCPUProfile()
	t.Logf("submitted %v, all JobSets and statuses %v, process CPU %v", submitted, all, cpuNow()-ru0)
}

func cpuNow() time.Duration {
	b, _ := os.ReadFile("/proc/self/stat")
	var utime, stime int64
	var skip string
	fields := 0
	s := string(b)
	i := 0
	for i < len(s) && s[i] != ')' {
		i++
	}
	rest := s[i+2:]
	_, _ = fmt.Sscan(rest, &skip)
	parts := splitFields(rest)
	_ = fields
	fmt.Sscan(parts[11], &utime)
	fmt.Sscan(parts[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func splitFields(s string) []string {
	var out []string
	cur := ""
	for _, r := range s {
		if r == ' ' {
			out = append(out, cur)
			cur = ""
			continue
		}
		cur += string(r)
	}
	return append(out, cur)
}
