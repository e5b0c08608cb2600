package compose

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/flyd-dev/flyd/spec"
)

// Extension is the service key that runs a service as flyd's own
// workload and carries flyd's fields.
const Extension = "x-flyd"

// mapper maps one compose project.
type mapper struct {
	model *types.Project
	files []rawFile
	warn  func(string)
	errs  []error
}

// refuse records that a field of service cannot be honoured.
func (m *mapper) refuse(service, field, format string, args ...any) {
	m.errs = append(m.errs, fmt.Errorf("%s: service %s: %s: %s", m.fileOf(service, topKey(field)), service, field, fmt.Sprintf(format, args...)))
}

// warnf says that a field of service is read and has no effect.
func (m *mapper) warnf(service, field, format string, args ...any) {
	m.warn(fmt.Sprintf("%s: service %s: %s: %s", m.fileOf(service, topKey(field)), service, field, fmt.Sprintf(format, args...)))
}

func topKey(field string) string {
	k, _, _ := strings.Cut(field, ".")
	k, _, _ = strings.Cut(k, "[")
	return k
}

// project maps the model: its networks, then each service, in name order.
func (m *mapper) project() (*spec.Documents, string, error) {
	name := label(m.model.Name)
	if !spec.ValidProject(name) {
		return nil, "", fmt.Errorf("%s: project name %q: a flyd project's name must be a DNS label (lower-case letters, digits and '-'): name it with -p", rel(m.model.ComposeFiles[0]), m.model.Name)
	}
	d := &spec.Documents{}
	m.topLevel()
	used := map[string]bool{}
	for _, sname := range slices.Sorted(maps.Keys(m.model.Services)) {
		svc := m.model.Services[sname]
		w := m.service(svc, used)
		if w != nil {
			d.Workloads = append(d.Workloads, w)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(used)) {
		n := m.model.Networks[key]
		egress := !n.Internal
		nw := &spec.Network{Kind: spec.KindNetwork, Name: label(key)}
		if !egress {
			nw.Egress = &egress
		}
		if err := nw.Validate(); err != nil {
			m.errs = append(m.errs, fmt.Errorf("%s: networks: %s: %w", rel(m.model.ComposeFiles[0]), key, err))
			continue
		}
		d.Docs = append(d.Docs, nw)
	}
	if len(m.errs) > 0 {
		return nil, "", errors.Join(m.errs...)
	}
	if err := d.SetProject(name); err != nil {
		return nil, "", err
	}
	return d, name, nil
}

// topLevel refuses or warns of the model's sections beside services.
func (m *mapper) topLevel() {
	file := rel(m.model.ComposeFiles[0])
	for key, n := range m.model.Networks {
		switch {
		case bool(n.External):
			m.errs = append(m.errs, fmt.Errorf("%s: networks: %s: external: flyd makes a project's networks itself and joins none it did not make", file, key))
		case n.Driver != "" && n.Driver != "bridge":
			m.warn(fmt.Sprintf("%s: networks: %s: driver %s: a flyd network is its own namespace with a link to the host: the driver is not used", file, key, n.Driver))
		}
		if len(n.Ipam.Config) > 0 || n.Ipam.Driver != "" {
			m.warn(fmt.Sprintf("%s: networks: %s: ipam: flyd allocates a network's addresses from its pool: not used", file, key))
		}
	}
	for key, v := range m.model.Volumes {
		switch {
		case bool(v.External):
			m.errs = append(m.errs, fmt.Errorf("%s: volumes: %s: external: a flyd volume is the project's own directory, made at its first use", file, key))
		case v.Driver != "" && v.Driver != "local" || len(v.DriverOpts) > 0:
			m.errs = append(m.errs, fmt.Errorf("%s: volumes: %s: driver: a flyd volume is a directory the daemon keeps: no driver nor driver_opts", file, key))
		}
	}
	if len(m.model.Secrets) > 0 {
		m.errs = append(m.errs, fmt.Errorf("%s: secrets: flyd has no compose secrets: give a workload secret_env through x-flyd", file))
	}
	if len(m.model.Configs) > 0 {
		m.errs = append(m.errs, fmt.Errorf("%s: configs: flyd has no compose configs: bind-mount the file (volumes) instead", file))
	}
	if len(m.model.Models) > 0 {
		m.errs = append(m.errs, fmt.Errorf("%s: models: flyd runs no models", file))
	}
	if len(m.model.Jobs) > 0 {
		m.errs = append(m.errs, fmt.Errorf("%s: jobs: flyd's scheduled one-shot is a workload's schedule (x-flyd)", file))
	}
}

// handled are the service keys the mapping reads; benign are those it
// warns of and leaves; every other key present is refused.
var handled = map[string]bool{
	"image": true, "command": true, "entrypoint": true, "environment": true, "env_file": true,
	"working_dir": true, "user": true, "healthcheck": true, "depends_on": true, "restart": true,
	"ports": true, "expose": true, "volumes": true, "develop": true, "stop_signal": true,
	"stop_grace_period": true, "deploy": true, "profiles": true, "networks": true, "network_mode": true,
	"build": true, "pull_policy": true, "scale": true, "labels": true,
}

var benign = map[string]string{
	"container_name": "flyd names a workload PROJECT.SERVICE",
	"hostname":       "a flyd network's workloads share its namespace, and its host name",
	"domainname":     "a flyd network's workloads share its namespace, and its host name",
	"init":           "flyd reaps a workload's orphans itself",
	"tty":            "a flyd workload's output goes to its log",
	"stdin_open":     "a flyd workload has no standard input",
	"logging":        "flyd keeps every workload's log itself (flyd logs)",
	"platform":       "images are pulled for this host's platform",
	"attach":         "flyd logs follows what it names",
	"annotations":    "flyd keeps no annotations",
	"extra_hosts":    "not written into /etc/hosts",
	"dns":            "a container's resolver is the host's",
	"dns_search":     "a container's resolver is the host's",
	"dns_opt":        "a container's resolver is the host's",
	"mac_address":    "a flyd network's workloads share its namespace",
}

// serviceKeys are the keys service has, as compose writes it back.
func serviceKeys(svc types.ServiceConfig) []string {
	data, err := json.Marshal(svc)
	if err != nil {
		return nil
	}
	var raw map[string]any
	if json.Unmarshal(data, &raw) != nil {
		return nil
	}
	var keys []string
	for k, v := range raw {
		if v == nil {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// service maps one service onto a workload, or records why it cannot.
func (m *mapper) service(svc types.ServiceConfig, usedNets map[string]bool) *spec.Workload {
	name := svc.Name
	before := len(m.errs)
	if !spec.ValidProject(label(name)) {
		m.refuse(name, "name", "a workload's name must be a DNS label (lower-case letters, digits and '-'): rename the service")
		return nil
	}
	ext, err := extension(svc)
	if err != nil {
		m.refuse(name, Extension, "%v", err)
		return nil
	}
	kind, _ := ext["kind"].(string)
	native := kind != "" && kind != string(spec.KindContainerd)
	for _, k := range serviceKeys(svc) {
		if handled[k] {
			continue
		}
		if why, ok := benign[k]; ok {
			m.warnf(name, k, "not used: %s", why)
			continue
		}
		m.refuse(name, k, "flyd cannot honour it: leave it out, or keep it in a file docker compose alone reads")
	}
	w := map[string]any{"name": label(name)}
	if !native {
		m.container(svc, w)
	} else {
		m.hostBound(svc, kind)
	}
	if env := m.environment(svc); len(env) > 0 {
		w["env"] = env
	}
	if len(svc.Profiles) > 0 {
		w["profiles"] = svc.Profiles
	}
	if len(svc.Labels) > 0 {
		m.warnf(name, "labels", "flyd keeps no labels: not used")
	}
	m.health(svc, w)
	m.dependsOn(svc, w)
	m.restart(svc, w)
	m.endpoints(svc, w, native)
	m.network(svc, w, usedNets)
	m.watch(svc, w)
	m.stop(svc, w)
	m.deploy(svc, w)
	if len(m.errs) > before {
		return nil
	}
	for k, v := range ext {
		w[k] = v
	}
	data, err := json.Marshal(w)
	if err != nil {
		m.refuse(name, Extension, "%v", err)
		return nil
	}
	d, err := spec.ParseAllIn(data, m.model.WorkingDir, nil)
	if err != nil {
		m.refuse(name, m.fieldOf(err, ext, native), "%s", messageOf(err))
		return nil
	}
	return d.Workloads[0]
}

// extension is the service's x-flyd mapping, if any.
func extension(svc types.ServiceConfig) (map[string]any, error) {
	raw, ok := svc.Extensions[Extension]
	if !ok || raw == nil {
		return nil, nil
	}
	ext, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a mapping of flyd's workload fields, not %T", raw)
	}
	if _, ok := ext["name"]; ok {
		return nil, errors.New("name: a service's workload is named after it")
	}
	if _, ok := ext["project"]; ok {
		return nil, errors.New("project: a service's workload is of the compose project")
	}
	return ext, nil
}

// fieldOf names, in compose's terms, the field flyd's parser refused: the
// x-flyd field when x-flyd gives it, else the compose field it came from.
func (m *mapper) fieldOf(err error, ext map[string]any, native bool) string {
	var fe *spec.FieldError
	if !errors.As(err, &fe) {
		return Extension
	}
	top := topKey(fe.Field)
	if _, ok := ext[top]; ok || native && (top == "command" || top == "workdir" || top == "user" || top == "kind" || top == "nix") {
		return Extension + "." + fe.Field
	}
	from := map[string]string{
		"command": "command", "workdir": "working_dir", "user": "user", "env": "environment",
		"health": "healthcheck", "after": "depends_on", "restart": "restart", "endpoints": "ports",
		"containerd": "image", "watch": "develop.watch", "stop": "stop_signal", "resources": "deploy.resources",
		"replicas": "deploy.replicas", "network": "networks", "profiles": "profiles",
	}
	if fe.Field == "containerd.volumes" || strings.HasPrefix(fe.Field, "containerd.volumes[") {
		return "volumes"
	}
	if c, ok := from[top]; ok {
		return c + " (flyd's " + fe.Field + ")"
	}
	return fe.Field
}

// messageOf is a parser's error without its line (a line of the mapped
// JSON, not of the compose file) and field (fieldOf names it).
func messageOf(err error) string {
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return fe.Msg
	}
	return err.Error()
}

// container maps what describes the image: a containerd workload.
func (m *mapper) container(svc types.ServiceConfig, w map[string]any) {
	name := svc.Name
	if svc.Image == "" {
		if svc.Build != nil {
			m.refuse(name, "build", "flyd runs images and builds none: build the image first (docker build -t NAME ., then ctr -n flyd images import, or push it to a registry) and name it in image:")
		} else {
			m.refuse(name, "image", "is required: a service runs an image, or a native or nix workload through %s", Extension)
		}
		return
	}
	if svc.Build != nil {
		m.warnf(name, "build", "flyd builds no image: it runs image %s, pulled when containerd's store does not have it", svc.Image)
	}
	switch svc.PullPolicy {
	case "", types.PullPolicyMissing, types.PullPolicyIfNotPresent:
	case types.PullPolicyBuild:
		m.refuse(name, "pull_policy", "build: flyd builds no image")
	default:
		m.warnf(name, "pull_policy", "%s: flyd pulls an image when containerd's store does not have it (missing)", svc.PullPolicy)
	}
	c := map[string]any{"image": svc.Image}
	var cmd []string
	switch {
	case svc.Entrypoint != nil:
		cmd = append(slices.Clone([]string(svc.Entrypoint)), svc.Command...)
	case svc.Command != nil:
		cmd = slices.Clone([]string(svc.Command))
		m.warnf(name, "command", "flyd runs it in place of the image's entrypoint and command both: if the image has an entrypoint, give it in entrypoint: too")
	}
	if len(cmd) > 0 {
		w["command"] = cmd
	}
	w["kind"] = string(spec.KindContainerd)
	if svc.WorkingDir != "" {
		w["workdir"] = svc.WorkingDir
	}
	if svc.User != "" {
		w["user"] = svc.User
	}
	var vols []string
	for i, v := range svc.Volumes {
		field := fmt.Sprintf("volumes[%d]", i)
		ro := ""
		if v.ReadOnly {
			ro = ":ro"
		}
		switch v.Type {
		case types.VolumeTypeBind:
			if v.Bind != nil && (v.Bind.Propagation != "" || v.Bind.SELinux != "") {
				m.warnf(name, field, "bind propagation and SELinux labels are not used")
			}
			vols = append(vols, v.Source+":"+v.Target+ro)
		case types.VolumeTypeVolume:
			if v.Source == "" {
				m.refuse(name, field, "an anonymous volume has no name to keep it by: name it (NAME:%s) and declare it under volumes:", v.Target)
				continue
			}
			if v.Volume != nil && (v.Volume.NoCopy || v.Volume.Subpath != "") {
				m.refuse(name, field, "nocopy and subpath are not supported: a flyd volume starts empty and is mounted whole")
				continue
			}
			vols = append(vols, label(v.Source)+":"+v.Target+ro)
		default:
			m.refuse(name, field, "type %s: flyd mounts a named volume or a host path (bind)", v.Type)
		}
	}
	if len(vols) > 0 {
		c["volumes"] = vols
	}
	w["containerd"] = c
}

// hostBound says what of the image's a native or nix service leaves: the
// command, user and paths of x-flyd are the host's.
func (m *mapper) hostBound(svc types.ServiceConfig, kind string) {
	if len(svc.Volumes) > 0 {
		m.warnf(svc.Name, "volumes", "a %s workload runs on the host's files: the image's volumes are not used", kind)
	}
	if svc.Build != nil && svc.Image == "" {
		m.warnf(svc.Name, "build", "a %s workload builds no image: not used", kind)
	}
}

// environment is the service's environment, env_file's variables in it
// (compose's loader puts them there); a variable left without a value is
// said and left out.
func (m *mapper) environment(svc types.ServiceConfig) map[string]string {
	env := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(svc.Environment)) {
		v := svc.Environment[k]
		if v == nil {
			m.warnf(svc.Name, "environment."+k, "has no value and the environment does not set it: left out")
			continue
		}
		env[k] = *v
	}
	return env
}

// health maps healthcheck onto an exec check.
func (m *mapper) health(svc types.ServiceConfig, w map[string]any) {
	hc := svc.HealthCheck
	if hc == nil || hc.Disable || len(hc.Test) == 0 {
		return
	}
	h := map[string]any{}
	switch hc.Test[0] {
	case "NONE":
		return
	case "CMD":
		h["exec"] = hc.Test[1:]
	case "CMD-SHELL":
		h["exec"] = []string{"/bin/sh", "-c", strings.Join(hc.Test[1:], " ")}
	default:
		m.refuse(svc.Name, "healthcheck.test", "must begin with CMD, CMD-SHELL or NONE, not %q", hc.Test[0])
		return
	}
	if hc.Interval != nil {
		h["interval"] = time.Duration(*hc.Interval).String()
	}
	if hc.Timeout != nil {
		h["timeout"] = time.Duration(*hc.Timeout).String()
	}
	if hc.StartPeriod != nil {
		h["start_period"] = time.Duration(*hc.StartPeriod).String()
	}
	if hc.Retries != nil {
		h["failures"] = *hc.Retries
	}
	if hc.StartInterval != nil {
		m.warnf(svc.Name, "healthcheck.start_interval", "flyd checks at interval from the start: not used")
	}
	w["health"] = h
}

// dependsOn maps depends_on onto after's conditions, restart: true onto
// +restart (follows).
func (m *mapper) dependsOn(svc types.ServiceConfig, w map[string]any) {
	var after []string
	for _, dep := range slices.Sorted(maps.Keys(svc.DependsOn)) {
		d := svc.DependsOn[dep]
		field := "depends_on." + dep
		if _, ok := m.model.Services[dep]; !ok {
			m.refuse(svc.Name, field, "no service %s in the project", dep)
			continue
		}
		cond := ""
		switch d.Condition {
		case "", types.ServiceConditionStarted:
			cond = spec.AfterStarted
		case types.ServiceConditionHealthy:
			cond = spec.AfterHealthy
		case types.ServiceConditionCompletedSuccessfully:
			cond = spec.AfterCompleted
		default:
			m.refuse(svc.Name, field+".condition", "must be service_started, service_healthy or service_completed_successfully, not %q", d.Condition)
			continue
		}
		if !d.Required {
			m.warnf(svc.Name, field+".required", "false: flyd waits for every workload after names")
		}
		e := label(dep) + ":" + cond
		if d.Restart {
			e += spec.AfterFollows
		}
		after = append(after, e)
	}
	if len(after) > 0 {
		w["after"] = after
	}
}

// restart maps restart (and deploy.restart_policy) onto flyd's policy.
// Compose's default is no restart.
func (m *mapper) restart(svc types.ServiceConfig, w map[string]any) {
	r := map[string]any{"policy": string(spec.RestartNever)}
	policy, max, _ := strings.Cut(svc.Restart, ":")
	switch policy {
	case "", types.RestartPolicyNo:
	case types.RestartPolicyAlways, types.RestartPolicyUnlessStopped:
		r["policy"], r["max_restarts"] = string(spec.RestartAlways), spec.UnlimitedRestarts
	case types.RestartPolicyOnFailure:
		r["policy"], r["max_restarts"] = string(spec.RestartOnFailure), spec.UnlimitedRestarts
		if max != "" {
			n, err := strconv.Atoi(max)
			if err != nil || n < 1 {
				m.refuse(svc.Name, "restart", "on-failure:%s: the count must be a number of at least 1", max)
				return
			}
			r["max_restarts"] = n
		}
	default:
		m.refuse(svc.Name, "restart", "must be no, always, on-failure[:N] or unless-stopped, not %q", svc.Restart)
		return
	}
	if svc.Deploy != nil && svc.Deploy.RestartPolicy != nil {
		rp := svc.Deploy.RestartPolicy
		switch rp.Condition {
		case "none":
			r["policy"] = string(spec.RestartNever)
		case "on-failure":
			r["policy"] = string(spec.RestartOnFailure)
		case "any", "":
			r["policy"] = string(spec.RestartAlways)
		}
		if rp.MaxAttempts != nil {
			r["max_restarts"] = *rp.MaxAttempts
		}
		if rp.Delay != nil {
			r["backoff"] = map[string]any{"initial": time.Duration(*rp.Delay).String()}
		}
		if rp.Window != nil {
			r["window"] = time.Duration(*rp.Window).String()
		}
	}
	w["restart"] = r
}

// endpoints maps ports (published: host:container) and expose onto
// endpoints named port-N, N the container's port.
func (m *mapper) endpoints(svc types.ServiceConfig, w map[string]any, native bool) {
	type ep struct {
		name    string
		port    uint32
		publish string
	}
	var eps []*ep
	byPort := map[uint32]*ep{}
	add := func(name string, port uint32) *ep {
		if e, ok := byPort[port]; ok {
			return e
		}
		if name == "" {
			name = "port-" + strconv.FormatUint(uint64(port), 10)
		}
		e := &ep{name: label(name), port: port}
		byPort[port] = e
		eps = append(eps, e)
		return e
	}
	for i, p := range svc.Ports {
		field := fmt.Sprintf("ports[%d]", i)
		switch {
		case p.Protocol != "" && p.Protocol != "tcp":
			m.refuse(svc.Name, field, "protocol %s: flyd's endpoints are TCP", p.Protocol)
			continue
		case strings.Contains(p.Published, "-"):
			m.refuse(svc.Name, field, "a range of host ports (%s) is not supported: publish each port", p.Published)
			continue
		case p.HostIP != "" && p.HostIP != "0.0.0.0" && p.HostIP != "127.0.0.1" && p.HostIP != "::":
			m.warnf(svc.Name, field, "host_ip %s: a published port listens on every address of the host", p.HostIP)
		}
		e := add(p.Name, p.Target)
		if p.Published == "" {
			e.publish = string(spec.PortEphemeral)
		} else {
			e.publish = p.Published
		}
	}
	for i, x := range svc.Expose {
		port, proto, _ := strings.Cut(x, "/")
		if proto != "" && proto != "tcp" {
			m.refuse(svc.Name, fmt.Sprintf("expose[%d]", i), "protocol %s: flyd's endpoints are TCP", proto)
			continue
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			m.refuse(svc.Name, fmt.Sprintf("expose[%d]", i), "%q: must be a port number (a range is not supported)", x)
			continue
		}
		add("", uint32(n))
	}
	if len(eps) == 0 {
		return
	}
	var out []map[string]any
	for _, e := range eps {
		o := map[string]any{"name": e.name, "port": e.port}
		if e.publish != "" {
			o["publish"] = e.publish
		}
		out = append(out, o)
	}
	w["endpoints"] = out
}

// network puts the service in its network: the project's network named
// as compose names it (default unless the service says another), or the
// host's for network_mode: host.
func (m *mapper) network(svc types.ServiceConfig, w map[string]any, used map[string]bool) {
	switch mode := svc.NetworkMode; {
	case mode == "host":
		w["network"] = spec.NetworkHost
		return
	case mode != "":
		m.refuse(svc.Name, "network_mode", "%s: a flyd workload is in a network of its project or the host's (network_mode: host)", mode)
		return
	}
	names := slices.Sorted(maps.Keys(svc.Networks))
	switch len(names) {
	case 0:
		names = []string{"default"}
	case 1:
	default:
		m.refuse(svc.Name, "networks", "%s: a flyd workload is in one network", strings.Join(names, ", "))
		return
	}
	if nc := svc.Networks[names[0]]; nc != nil && (len(nc.Aliases) > 0 || nc.Ipv4Address != "" || nc.Ipv6Address != "") {
		m.warnf(svc.Name, "networks."+names[0], "aliases and fixed addresses are not used: a network's workloads share its address")
	}
	if _, ok := m.model.Networks[names[0]]; !ok && names[0] != "default" {
		m.refuse(svc.Name, "networks", "no network %s in the project", names[0])
		return
	}
	used[names[0]] = true
	w["network"] = label(names[0])
}

// watch maps develop.watch onto watch entries.
func (m *mapper) watch(svc types.ServiceConfig, w map[string]any) {
	if svc.Develop == nil {
		return
	}
	var out []map[string]any
	for i, t := range svc.Develop.Watch {
		field := fmt.Sprintf("develop.watch[%d]", i)
		e := map[string]any{"path": t.Path}
		switch t.Action {
		case types.WatchActionRestart:
			e["action"] = spec.WatchRestart
		case types.WatchActionSync:
			e["action"], e["target"] = spec.WatchSync, t.Target
		case types.WatchActionRebuild:
			m.refuse(svc.Name, field+".action", "rebuild: flyd builds no image (restart restarts; a native workload's exec action rebuilds through %s)", Extension)
			continue
		default:
			m.refuse(svc.Name, field+".action", "%s: flyd's actions are sync, restart, and exec through %s", t.Action, Extension)
			continue
		}
		if len(t.Ignore) > 0 {
			e["ignore"] = t.Ignore
		}
		if len(t.Include) > 0 {
			e["include"] = t.Include
		}
		if t.InitialSync {
			m.warnf(svc.Name, field+".initial_sync", "flyd syncs changes only: not used")
		}
		out = append(out, e)
	}
	if len(out) > 0 {
		w["watch"] = out
	}
}

// stop maps stop_signal and stop_grace_period.
func (m *mapper) stop(svc types.ServiceConfig, w map[string]any) {
	s := map[string]any{}
	if svc.StopSignal != "" {
		s["signal"] = svc.StopSignal
	}
	if svc.StopGracePeriod != nil {
		s["timeout"] = time.Duration(*svc.StopGracePeriod).String()
	}
	if len(s) > 0 {
		w["stop"] = s
	}
}

// deploy maps deploy.replicas (or scale) and deploy.resources.limits.
func (m *mapper) deploy(svc types.ServiceConfig, w map[string]any) {
	if n := svc.GetScale(); n > 1 {
		w["replicas"] = n
	} else if n == 0 {
		w["disabled"] = true
	}
	d := svc.Deploy
	if d == nil {
		return
	}
	if d.Mode != "" && d.Mode != "replicated" {
		m.refuse(svc.Name, "deploy.mode", "%s: flyd runs replicas on this host (replicated)", d.Mode)
	}
	if len(d.Labels) > 0 {
		m.warnf(svc.Name, "deploy.labels", "flyd keeps no labels: not used")
	}
	if d.UpdateConfig != nil || d.RollbackConfig != nil {
		m.warnf(svc.Name, "deploy.update_config", "flyd replaces replicas one at a time, each ready before the next: not used")
	}
	if len(d.Placement.Constraints) > 0 || len(d.Placement.Preferences) > 0 {
		m.warnf(svc.Name, "deploy.placement", "flyd runs on one host: not used")
	}
	if r := d.Resources.Reservations; r != nil {
		m.warnf(svc.Name, "deploy.resources.reservations", "flyd sets limits (and cpu_weight through %s), no reservations: not used", Extension)
	}
	l := d.Resources.Limits
	if l == nil {
		return
	}
	res := map[string]any{}
	if l.MemoryBytes > 0 {
		res["memory_max"] = int64(l.MemoryBytes)
	}
	if l.NanoCPUs > 0 {
		res["cpu_max"] = strconv.FormatFloat(float64(l.NanoCPUs), 'f', -1, 32)
	}
	if l.Pids > 0 {
		res["pids_max"] = l.Pids
	}
	if len(l.Devices) > 0 || len(l.GenericResources) > 0 {
		m.refuse(svc.Name, "deploy.resources.limits.devices", "flyd gives a workload no devices")
	}
	if len(res) > 0 {
		w["resources"] = res
	}
}

// label makes a compose name (which may hold '_' and '.') a DNS label.
func label(s string) string {
	b := []byte(strings.ToLower(s))
	for i, ch := range b {
		if (ch < 'a' || ch > 'z') && (ch < '0' || ch > '9') && ch != '-' {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b[:min(len(b), 63)]), "-")
}
