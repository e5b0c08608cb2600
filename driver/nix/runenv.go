package nix

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/flyd-dev/flyd/driver"
	"github.com/flyd-dev/flyd/internal/execenv"
	"github.com/flyd-dev/flyd/spec"
)

// freshTmp creates the run's TMPDIR, removing whatever a previous run left.
func (d *Driver) freshTmp(t *driver.Task) (string, error) {
	base := filepath.Join(d.CacheDir, "tmp")
	if err := os.MkdirAll(base, 0o711); err != nil {
		return "", err
	}
	name := t.Workload
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", fmt.Errorf("%w: bad workload name %q", driver.ErrExec, name)
	}
	dir := filepath.Join(base, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if t.Spec.User != "" {
		a, err := execenv.Lookup(t.Spec.User)
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("%w: user %q: %v", driver.ErrExec, t.Spec.User, err)
		}
		if err := os.Chown(dir, int(a.UID), int(a.GID)); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// merge builds the run's environment: the devShell's variables under the
// task's own (the workload's and flyd's, CODEFLY__RUNTIME_CONTEXT among
// them, win), the devShell's PATH before the task's, and TMPDIR.
func merge(vars map[string]string, task []string, tmp string) []string {
	m := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = v
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set(k, vars[k])
	}
	for _, k := range []string{"TMPDIR", "TMP", "TEMP", "TEMPDIR"} {
		set(k, tmp)
	}
	for _, kv := range task {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" && vars["PATH"] != "" {
			if v == "" {
				v = vars["PATH"]
			} else {
				v = vars["PATH"] + ":" + v
			}
		}
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+m[k])
	}
	return out
}

func environVar(pid int, key string) (string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// process is a native run whose TMPDIR is removed before Done closes.
type process struct {
	driver.Process
	st          driver.State
	tmp         string
	done        chan struct{}
	released    chan struct{}
	releaseOnce sync.Once
}

func wrap(p driver.Process, tmp string) (*process, error) {
	st := p.State()
	native := runState{Native: st.Data, NativeVersion: st.Version, TmpDir: tmp}
	st.Driver = spec.KindNix
	if err := st.Encode(stateVersion, native); err != nil {
		return nil, err
	}
	w := &process{Process: p, st: st, tmp: tmp, done: make(chan struct{}), released: make(chan struct{})}
	go func() {
		select {
		case <-p.Done():
			if w.tmp != "" {
				_ = os.RemoveAll(w.tmp)
			}
			close(w.done)
		case <-w.released:
		}
	}()
	return w, nil
}

func (p *process) State() driver.State { return p.st }

func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) Release() {
	p.releaseOnce.Do(func() { close(p.released) })
	p.Process.Release()
}
