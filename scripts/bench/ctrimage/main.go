// Command ctrimage writes the busybox OCI image archive the containerd part
// of scripts/bench/run imports: the one driver/containerd's tests use
// (ctrtest.BusyboxArchive, static busybox with every applet in /bin), since
// no registry can be reached.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/flyd-dev/flyd/driver/containerd/ctrtest"
)

func main() {
	out := flag.String("o", "", "the archive to write")
	name := flag.String("name", "docker.io/library/bbox:latest", "the image's name")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "usage: ctrimage -o ARCHIVE.tar [-name IMAGE]")
		os.Exit(2)
	}
	if err := ctrtest.BusyboxArchive(*out, *name); err != nil {
		fmt.Fprintln(os.Stderr, "ctrimage:", err)
		os.Exit(1)
	}
}
