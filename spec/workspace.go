package spec

import (
	"strings"
)

// KindWorkspace is the kind of a workspace document, beside workloads.
const KindWorkspace = "workspace"

// Workspaces are put in force first, so that their configurations reach
// their workloads' first runs. The workloads directory takes none: a
// workspace holds secrets, given with flyd apply or flyd up.
func init() {
	RegisterDocKind(DocKind{Name: KindWorkspace, Plural: "workspaces", Rank: 10, InDirectory: false,
		New: func() Document { return new(Workspace) }})
}

// DocKind is the workspace document's kind.
func (ws *Workspace) DocKind() string { return KindWorkspace }

// DocName is the workspace's name.
func (ws *Workspace) DocName() string { return ws.Name }

// CloneDocument is Clone as a Document.
func (ws *Workspace) CloneDocument() Document { return ws.Clone() }

// Workspace is a workspace document: the configurations every workload of
// the workspace is given (its identity.workspace; "default" for one that
// names none), under codefly's names CODEFLY__WORKSPACE_CONFIGURATION__
// NAME__KEY and …_SECRET_CONFIGURATION__… (seed 000, "Workspace-Level
// Configuration"). In a project, it is given to that project's workloads.
type Workspace struct {
	Kind    string `json:"kind"` // "workspace"
	Name    string `json:"name"`
	Project string `json:"project,omitempty"`
	// Configuration and SecretConfiguration are name → key → value, as a
	// workload's; secret values are redacted wherever it is shown.
	Configuration       Configurations `json:"configuration,omitempty"`
	SecretConfiguration Configurations `json:"secret_configuration,omitempty"`
}

// Validate checks a workspace document.
func (ws *Workspace) Validate() error {
	var p problems
	if ws.Kind != KindWorkspace {
		p.add("kind", "must be %q for a workspace document", KindWorkspace)
	}
	if !validFull(ws.Name) {
		p.add("name", "must be a workspace's name of %s", nameRule)
	}
	validateDocProject(&p, ws.Project, ws.Name)
	validateConfigurations(&p, "configuration", ws.Configuration)
	validateConfigurations(&p, "secret_configuration", ws.SecretConfiguration)
	for _, n := range sortedKeys(ws.SecretConfiguration) {
		for _, k := range sortedKeys(ws.SecretConfiguration[n]) {
			if _, dup := ws.Configuration[n][k]; dup {
				p.add(joinPath(joinPath("secret_configuration", n), k), "is also set in configuration")
			}
		}
	}
	return p.err()
}

// Clone is a deep copy.
func (ws *Workspace) Clone() *Workspace {
	if ws == nil {
		return nil
	}
	c := *ws
	c.Configuration, c.SecretConfiguration = ws.Configuration.clone(), ws.SecretConfiguration.clone()
	return &c
}

// Redacted is ws with its secret values replaced, for showing.
func (ws *Workspace) Redacted() *Workspace {
	c := ws.Clone()
	for _, kv := range c.SecretConfiguration {
		for k := range kv {
			kv[k] = RedactedValue
		}
	}
	return c
}

// SetProject is Workload.SetProject for a workspace document.
func (ws *Workspace) SetProject(project string) error {
	return setProject(&ws.Project, ws.Name, project)
}

// Qualify makes a workspace document's name full.
func (ws *Workspace) Qualify() {
	if ws.Project == "" {
		ws.Project = ProjectOf(ws.Name)
	}
	ws.Name = inProject(ws.Project, ws.Name)
}

// WorkspaceConfigurationVar is the variable codefly's SDKs read a
// workspace's configuration value from: CODEFLY__WORKSPACE_CONFIGURATION__
// NAME__KEY (…_SECRET_CONFIGURATION__… for a secret), upper-cased, "-"
// turned to "_", as codefly-dev/core builds it.
func WorkspaceConfigurationVar(name, key string, secret bool) string {
	prefix := "CODEFLY__WORKSPACE_CONFIGURATION__"
	if secret {
		prefix = "CODEFLY__WORKSPACE_SECRET_CONFIGURATION__"
	}
	return prefix + strings.ToUpper(strings.ReplaceAll(name+"__"+key, "-", "_"))
}
