package spec

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Validate checks a workload that has had SetDefaults applied. It reports
// every problem it finds, each a *FieldError, joined with errors.Join (a
// single problem is returned as the *FieldError itself).
func (w *Workload) Validate() error {
	var p problems
	if !validFull(w.Name) {
		p.add("name", "must be %s (or PROJECT.NAME, each so)", nameRule)
	}
	w.validateProject(&p)
	w.validateKind(&p)
	w.validateCommand(&p)
	if w.Workdir != "" && (!filepath.IsAbs(w.Workdir) || strings.ContainsRune(w.Workdir, 0)) {
		p.add("workdir", "must be an absolute path")
	}
	if strings.ContainsAny(w.User, ": \t\n\x00") {
		p.add("user", "must be a user name or a numeric uid, without a group")
	}
	validateEnv(&p, "env", w.Env)
	validateEnv(&p, "secret_env", w.SecretEnv)
	for _, k := range sortedKeys(w.SecretEnv) {
		if _, dup := w.Env[k]; dup {
			p.add(joinPath("secret_env", k), "is also set in env")
		}
	}
	for i, f := range w.EnvFile {
		if f == "" || strings.ContainsRune(f, 0) {
			p.add(indexPath("env_file", i), "must be a path")
		}
	}
	w.validateProfiles(&p)
	validateConfigurations(&p, "configuration", w.Configuration)
	validateConfigurations(&p, "secret_configuration", w.SecretConfiguration)
	for _, n := range sortedKeys(w.SecretConfiguration) {
		for _, k := range sortedKeys(w.SecretConfiguration[n]) {
			if _, dup := w.Configuration[n][k]; dup {
				p.add(joinPath(joinPath("secret_configuration", n), k), "is also set in configuration")
			}
		}
	}
	w.validateEndpoints(&p)
	if w.Network != NetworkHost && !validFull(w.Network) {
		p.add("network", "must be %q or a network name of %s", NetworkHost, nameRule)
	}
	w.Restart.validate(&p)
	w.validateSchedule(&p)
	w.validateReplicas(&p)
	w.Stop.validate(&p)
	if len(w.Stop.Exec) > 0 && w.runtime().InContainer {
		p.add("stop.exec", "applies to %s workloads: a container's stop is a signal", outsideContainers())
	}
	w.validateForking(&p)
	if w.Health != nil {
		w.validateHealth(&p)
	}
	if w.Resources != nil {
		w.Resources.validate(&p)
	}
	w.validateAfter(&p)
	w.validateUses(&p)
	if r := w.Reload; r != nil {
		switch {
		case (r.Signal == "") == (len(r.Exec) == 0):
			p.add("reload", "set exactly one of signal or exec")
		case r.Signal != "":
			if _, err := ParseSignal(r.Signal); err != nil {
				p.add("reload.signal", "%v", err)
			}
		case w.runtime().InContainer:
			p.add("reload.exec", "applies to %s workloads: a container's reload is a signal", outsideContainers())
		}
		validateArgv(&p, "reload.exec", r.Exec)
	}
	if w.Registry != nil {
		w.Registry.validate(&p)
	}
	w.validateWatch(&p)
	return p.err()
}

// MaxProblems is how many problems one validation reports: enough to fix
// a spec in one pass, few enough that a hostile one with 60,000 bad keys
// costs no more to refuse than to read.
const MaxProblems = 20

// problems collects FieldErrors so one run reports everything wrong, up to
// MaxProblems, and counts the rest.
type problems struct {
	errs []error
	more int
}

func (p *problems) add(field, format string, args ...any) {
	if len(p.errs) == MaxProblems {
		p.more++
		return
	}
	p.errs = append(p.errs, fieldErrorf(field, format, args...))
}

func (p *problems) err() error {
	switch {
	case len(p.errs) == 1:
		return p.errs[0]
	case p.more > 0:
		return errors.Join(append(p.errs, fmt.Errorf("and %d more problems", p.more))...)
	}
	return errors.Join(p.errs...)
}

func (w *Workload) validateKind(p *problems) {
	rt, ok := RuntimeOf(w.Kind)
	if !ok {
		p.add("kind", "must be %s", kindsWhere(func(Runtime) bool { return true }, "or"))
	}
	if ok && w.PrivateTmp && (rt.InContainer || rt.RunsNothing) {
		p.add("private_tmp", "applies to %s workloads: a container has a /tmp of its own", outsideContainers())
	}
	for _, tmp := range []string{"/tmp", "/var/tmp"} {
		if w.PrivateTmp && (w.Workdir == tmp || strings.HasPrefix(w.Workdir, tmp+"/")) {
			p.add("workdir", "%s is under %s, which private_tmp replaces with the run's own, so the run could not start there: name a workdir elsewhere (without one, a spec file's workload starts in the file's directory)", w.Workdir, tmp)
		}
	}
	if ok && rt.Validate != nil {
		rt.Validate(w, p)
	}
	for _, r := range runtimes {
		if r.Section != "" && r.Kind != w.Kind && r.Has(w) {
			p.add(r.Section, "only applies to kind %s", r.Kind)
		}
	}
}

func (w *Workload) validateCommand(p *problems) {
	// A containerd image brings its own entrypoint; an external service
	// runs nothing.
	if rt := w.runtime(); len(w.Command) == 0 && !rt.ImageCommand && !rt.RunsNothing {
		p.add("command", "is required for kind %s", w.Kind)
	}
	validateArgv(p, "command", w.Command)
}

func validateArgv(p *problems, field string, argv []string) {
	if len(argv) > 0 && argv[0] == "" {
		p.add(indexPath(field, 0), "must not be empty")
	}
	for i, arg := range argv {
		if strings.ContainsRune(arg, 0) {
			p.add(indexPath(field, i), "must not contain a NUL byte")
		}
	}
}

// validateEnv never puts a value in a message: for secret_env that would be
// the secret itself.
func validateEnv(p *problems, field string, env map[string]string) {
	for _, k := range sortedKeys(env) {
		if !validEnvKey(k) {
			p.add(joinPath(field, k), "variable name %s", envKeyRule)
		}
		if strings.ContainsRune(env[k], 0) {
			p.add(joinPath(field, k), "value must not contain a NUL byte")
		}
	}
}

// validateConfigurations refuses a name or key that would not make a
// variable name (letters, digits, '_' and '-', which becomes '_') and a
// value with a NUL.
func validateConfigurations(p *problems, field string, c Configurations) {
	for _, n := range sortedKeys(c) {
		if !configName.MatchString(n) {
			p.add(joinPath(field, n), "a configuration's name is letters, digits, '_' and '-', beginning with a letter or digit")
		}
		for _, k := range sortedKeys(c[n]) {
			if !configName.MatchString(k) {
				p.add(joinPath(joinPath(field, n), k), "a key is letters, digits, '_' and '-', beginning with a letter or digit")
			}
			if strings.ContainsRune(c[n][k], 0) {
				p.add(joinPath(joinPath(field, n), k), "value must not contain a NUL byte")
			}
		}
	}
}

var configName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func (w *Workload) validateProfiles(p *problems) {
	seen := make(map[string]bool, len(w.Profiles))
	for i, name := range w.Profiles {
		switch {
		case !validName(name):
			p.add(indexPath("profiles", i), "a profile's name must be %s", nameRule)
		case seen[name]:
			p.add(indexPath("profiles", i), "%q is listed twice", name)
		}
		seen[name] = true
	}
}

func (w *Workload) validateAfter(p *problems) {
	seen := make(map[string]bool, len(w.After))
	for i, entry := range w.After {
		field := indexPath("after", i)
		name, cond := ParseAfter(entry)
		switch {
		case !validFull(name):
			p.add(field, "must be %s, with :%s, :%s or :%s after it", nameRule, AfterStarted, AfterHealthy, AfterCompleted)
		case cond != AfterHealthy && cond != AfterStarted && cond != AfterCompleted:
			p.add(field, "the condition %q is none of %s, %s or %s", cond, AfterStarted, AfterHealthy, AfterCompleted)
		case cond == AfterCompleted && Follows(entry):
			p.add(field, "%s follows a running workload; a completed one-shot has no run to follow", AfterFollows)
		case name == w.Name:
			p.add(field, "a workload cannot wait for itself")
		case seen[name]:
			p.add(field, "%q is listed twice", name)
		}
		seen[name] = true
	}
}

func (w *Workload) validateUses(p *problems) {
	seen := make(map[string]bool, len(w.Uses))
	for i, entry := range w.Uses {
		field := indexPath("uses", i)
		name, ep := ParseUse(entry)
		switch {
		case !validFull(name) || (strings.Contains(entry, "/") && !validName(ep)):
			p.add(field, "must be a workload name, or NAME/ENDPOINT, each %s", nameRule)
		case name == w.Name:
			p.add(field, "a workload cannot use itself")
		case seen[entry]:
			p.add(field, "%q is listed twice", entry)
		}
		seen[entry] = true
	}
}

// sortedKeys makes the order of reported problems stable.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func positive(p *problems, field string, d Duration) {
	if d.Duration <= 0 {
		p.add(field, "must be greater than 0, got %s", d.Duration)
	}
}

// Bounds on the durations that pace the daemon's own work: a workload
// may not make it restart, probe or wait without end.
const (
	// MinBackoff keeps a crash loop to at most 20 starts a second.
	MinBackoff = 50 * time.Millisecond
	// MinHealthInterval keeps a health check to at most 10 probes a second.
	MinHealthInterval = 100 * time.Millisecond
	// MaxStopTimeout bounds the grace a stop gives before it kills.
	MaxStopTimeout = time.Hour
)

func atLeast(p *problems, field string, d Duration, least time.Duration) {
	if d.Duration < least {
		p.add(field, "must be at least %s, got %s", least, d.Duration)
	}
}
