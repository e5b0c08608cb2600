package order

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flyd-dev/flyd/spec"
	"github.com/flyd-dev/flyd/status"
)

func TestReady(t *testing.T) {
	yes, no := true, false
	checked := &spec.Workload{Name: "db", Health: &spec.Health{Notify: true}}
	plain := &spec.Workload{Name: "db"}
	ok := &status.Exit{Code: 0, Description: "exit 0"}
	bad := &status.Exit{Code: 3, Description: "exit 3"}
	for _, c := range []struct {
		name  string
		v     status.Workload
		cond  string
		ready bool
		never string
	}{
		{"running without a check", status.Workload{State: status.Running, Spec: plain}, spec.AfterHealthy, true, ""},
		{"running, not yet healthy", status.Workload{State: status.Running, Spec: checked}, spec.AfterHealthy, false, ""},
		{"running, unhealthy", status.Workload{State: status.Running, Spec: checked, Healthy: &no}, spec.AfterHealthy, false, ""},
		{"running, healthy", status.Workload{State: status.Running, Spec: checked, Healthy: &yes}, spec.AfterHealthy, true, ""},
		{"started, whatever its health", status.Workload{State: status.Running, Spec: checked, Healthy: &no}, spec.AfterStarted, true, ""},
		{"starting", status.Workload{State: status.Starting, Spec: plain}, spec.AfterStarted, false, ""},
		{"failed", status.Workload{State: status.Failed, LastError: "boom"}, spec.AfterStarted, false, "db, which it waits for, failed: boom"},
		{"completed", status.Workload{State: status.Exited, LastExit: ok}, spec.AfterCompleted, true, ""},
		{"scheduled after a run that completed", status.Workload{State: status.Scheduled, LastExit: ok}, spec.AfterCompleted, true, ""},
		{"scheduled after a run that failed", status.Workload{State: status.Scheduled, LastExit: bad}, spec.AfterCompleted, false, ""},
		{"exited with an error", status.Workload{State: status.Exited, LastExit: bad}, spec.AfterCompleted, false, "db, which it waits for to complete, ended with exit 3"},
		{"running, to complete", status.Workload{State: status.Running}, spec.AfterCompleted, false, ""},
		{"exited, to be healthy", status.Workload{State: status.Exited, LastExit: ok}, spec.AfterHealthy, false, ""},
	} {
		c.v.Name = "db"
		ready, never := Ready(c.v, c.cond)
		if ready != c.ready || never != c.never {
			t.Errorf("%s: Ready = %v, %q; want %v, %q", c.name, ready, never, c.ready, c.never)
		}
	}
}

func TestWaitsForAndFollows(t *testing.T) {
	web := &spec.Workload{Name: "web", After: []string{"db:healthy+restart", "cache:started"}, Uses: []string{"auth/http"}}
	for _, c := range []struct {
		state status.State
		name  string
		want  bool
	}{
		{status.Pending, "db", true},
		{status.Pending, "cache", true},
		{status.Pending, "auth", true}, // used, so waited for
		{status.Pending, "other", false},
		{status.Running, "db", false},
	} {
		if got := WaitsFor(status.Workload{State: c.state, Spec: web}, c.name); got != c.want {
			t.Errorf("%s, waits for %s: %v", c.state, c.name, got)
		}
	}
	if WaitsFor(status.Workload{State: status.Pending}, "db") {
		t.Error("a workload without a spec waits")
	}
	for _, c := range []struct {
		name, group string
		want        bool
	}{
		{"db", "", true},
		{"db-2", "db", true},
		{"cache", "", false}, // waited for, not followed
		{"other", "", false},
		{"x", "", false},
	} {
		if got := Follows(web, c.name, c.group); got != c.want {
			t.Errorf("follows %s of %q: %v", c.name, c.group, got)
		}
	}
}

func TestStopLevels(t *testing.T) {
	specs := map[string]*spec.Workload{
		"db":    {Name: "db"},
		"cache": {Name: "cache"},
		"api":   {Name: "api", After: []string{"db"}, Uses: []string{"cache"}},
		"web":   {Name: "web", After: []string{"api"}},
		"a":     {Name: "a", After: []string{"b"}},
		"b":     {Name: "b", After: []string{"a"}},
	}
	specOf := func(n string) *spec.Workload { return specs[n] }
	for _, c := range []struct {
		names []string
		want  [][]string
	}{
		{[]string{"db", "cache"}, [][]string{{"cache", "db"}}}, // a level by name
		{[]string{"db", "api", "web"}, [][]string{{"web"}, {"api"}, {"db"}}},
		{[]string{"db", "api", "gone"}, [][]string{{"api", "gone"}, {"db"}}},
		{[]string{"gone"}, [][]string{{"gone"}}},
		{[]string{"a", "b", "db"}, [][]string{{"a", "b", "db"}}},
	} {
		if got := StopLevels(c.names, specOf); !reflect.DeepEqual(got, c.want) {
			t.Errorf("StopLevels(%v) = %v; want %v", c.names, got, c.want)
		}
	}
}

func TestInLevels(t *testing.T) {
	var calls atomic.Int32
	each := func(n int, f func(i int)) {
		calls.Add(1)
		for i := n - 1; i >= 0; i-- {
			f(i)
		}
	}
	var seen []string
	out := InLevels([]string{"db", "api", "web"}, [][]string{{"web"}, {"api", "db"}}, each, func(name string) string {
		seen = append(seen, name)
		return strings.ToUpper(name)
	})
	if !reflect.DeepEqual(out, []string{"DB", "API", "WEB"}) || calls.Load() != 2 || fmt.Sprint(seen) != "[web db api]" {
		t.Fatalf("outcomes %v, %d levels, in the order %v", out, calls.Load(), seen)
	}
}

// TestStopLanes: each owner's workloads stop in levels among their own; a
// dependency on another owner's workload orders nothing.
func TestStopLanes(t *testing.T) {
	specs := map[string]*spec.Workload{
		"rdb":  {Name: "rdb"},
		"rapp": {Name: "rapp", Uses: []string{"rdb"}},
		"pdep": {Name: "pdep", Uses: []string{"rdb"}, After: []string{"rapp"}},
		"pweb": {Name: "pweb", After: []string{"pdep"}},
	}
	owners := map[string]uint32{"pdep": 33, "pweb": 33}
	specOf := func(n string) *spec.Workload { return specs[n] }
	ownerOf := func(n string) uint32 { return owners[n] }
	got := StopLanes([]string{"pdep", "rdb", "pweb", "rapp"}, specOf, ownerOf)
	want := [][][]string{{{"pweb"}, {"pdep"}}, {{"rapp"}, {"rdb"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StopLanes = %v; want %v", got, want)
	}
	// One owner: StopLevels' levels.
	if got := StopLanes([]string{"pdep", "rdb", "rapp"}, specOf, func(string) uint32 { return 0 }); !reflect.DeepEqual(got, [][][]string{{{"pdep"}, {"rapp"}, {"rdb"}}}) {
		t.Errorf("StopLanes of one owner = %v", got)
	}
}

// TestInLanes: the lanes run side by side, a lane's levels in order: a
// lane whose first level is held does not hold another's later levels.
func TestInLanes(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	level := func(names []string) []string {
		if names[0] == "held" {
			<-release
		}
		mu.Lock()
		seen = append(seen, names...)
		if slices.Contains(names, "rdb") {
			close(release) // root's lane ended while the other was held
		}
		mu.Unlock()
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = strings.ToUpper(n)
		}
		return out
	}
	names := []string{"rdb", "held", "rapp", "after"}
	out := InLanes(names, [][][]string{{{"held"}, {"after"}}, {{"rapp"}, {"rdb"}}}, level)
	if !reflect.DeepEqual(out, []string{"RDB", "HELD", "RAPP", "AFTER"}) || fmt.Sprint(seen) != "[rapp rdb held after]" {
		t.Fatalf("outcomes %v, in the order %v", out, seen)
	}
}
