package containerd

import (
	"math"

	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/flyd-dev/flyd/sandbox"
)

// resourceOpts are the limits as OCI linux.resources, for a container
// that does not run in a cgroup of flyd's (which has them already): the
// limits parsed once by the supervisor, the same conversions as the
// cgroups'.
func resourceOpts(l sandbox.Limits) []oci.SpecOpts {
	var out []oci.SpecOpts
	if l.MemoryMax > 0 {
		out = append(out, oci.WithMemoryLimit(uint64(l.MemoryMax)))
	}
	if l.CPUMax > 0 {
		out = append(out, oci.WithCPUCFS(int64(math.Round(l.CPUMax*sandbox.CFSPeriod)), sandbox.CFSPeriod))
	}
	if l.CPUWeight > 0 {
		out = append(out, oci.WithCPUShares(l.CPUShares()))
	}
	if l.PidsMax > 0 {
		out = append(out, oci.WithPidsLimit(int64(l.PidsMax)))
	}
	return out
}
