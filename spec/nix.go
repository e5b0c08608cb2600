package spec

// KindNix runs its command inside a nix devShell, or runs a nix package.
const KindNix Kind = "nix"

// Nix is required for kind nix: either a flake whose devShell provides the
// environment for Command, or a package to build and run from.
type Nix struct {
	Flake   string `json:"flake,omitempty"`
	Shell   string `json:"shell,omitempty"` // devShell name, default "default"; only with Flake
	Package string `json:"package,omitempty"`
}

func init() {
	registerRuntime(Runtime{Kind: KindNix, Rank: 20, Section: "nix",
		Has: func(w *Workload) bool { return w.Nix != nil }, Validate: validateNix})
}

func validateNix(w *Workload, p *problems) {
	switch n := w.Nix; {
	case n == nil:
		p.add("nix", "is required for kind nix")
	case n.Flake != "" && n.Package != "":
		p.add("nix", "set either flake or package, not both")
	case n.Flake == "" && n.Package == "":
		p.add("nix", "needs a flake or a package")
	case n.Package != "" && n.Shell != "":
		p.add("nix.shell", "only applies to a flake's devShell, not to a package")
	}
}
