// Package nixsystem names this machine's platform as Nix does
// (x86_64-linux), for the driver and for the tests' flakes alike.
package nixsystem

import "runtime"

// Name is Nix's name for the platform flyd runs on.
func Name() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686",
		"riscv64": "riscv64", "ppc64le": "powerpc64le"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return arch + "-linux"
}
