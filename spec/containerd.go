package spec

// KindContainerd runs an image under containerd.
const KindContainerd Kind = "containerd"

// Containerd is required for kind containerd. Archive, when set, is an image
// tarball imported before Image is looked up, for hosts without a registry.
// Volumes are mounts in compose's short syntax (volume.go):
// "/srv/src:/app:ro" bind-mounts a host path, "data:/var/lib/data" a
// named volume of the workload's project, kept across runs.
type Containerd struct {
	Image   string   `json:"image,omitempty"`
	Archive string   `json:"archive,omitempty"`
	Volumes []string `json:"volumes,omitempty"`
}

func init() {
	registerRuntime(Runtime{Kind: KindContainerd, Rank: 30, InContainer: true, ImageCommand: true, Section: "containerd",
		Has: func(w *Workload) bool { return w.Containerd != nil }, Validate: validateContainerd})
}

func validateContainerd(w *Workload, p *problems) {
	if w.Containerd == nil || w.Containerd.Image == "" {
		p.add("containerd.image", "is required for kind containerd")
	}
	if w.Containerd != nil {
		w.Containerd.validateVolumes(p)
	}
}
