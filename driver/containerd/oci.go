package containerd

import (
	"fmt"
	"strconv"

	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/flyd-dev/flyd/spec"
)

// resourceOpts turns spec resources into OCI linux.resources.
func resourceOpts(r *spec.Resources) ([]oci.SpecOpts, error) {
	var out []oci.SpecOpts
	if r == nil {
		return nil, nil
	}
	if r.MemoryMax > 0 {
		out = append(out, oci.WithMemoryLimit(uint64(r.MemoryMax)))
	}
	if r.CPUMax != "" {
		cores, err := strconv.ParseFloat(r.CPUMax, 64)
		if err != nil || cores <= 0 {
			return nil, fmt.Errorf("resources.cpu_max %q is not a positive number of cores", r.CPUMax)
		}
		const period = 100000
		out = append(out, oci.WithCPUCFS(int64(cores*period), period))
	}
	if r.CPUWeight > 0 {
		// cgroup v1 shares: weight 100 ~ 1024 shares.
		out = append(out, oci.WithCPUShares(uint64(r.CPUWeight)*1024/100))
	}
	if r.PidsMax > 0 {
		out = append(out, oci.WithPidsLimit(int64(r.PidsMax)))
	}
	return out, nil
}
