package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/errdefs"
	"github.com/flyd-dev/flyd/netalloc"
	"github.com/flyd-dev/flyd/spec"
)

func init() {
	cli.RegisterQuery("ports", "list every endpoint's port and addresses", "", cmdPorts)
	cli.Register("exec", "run a command inside an isolated network", "--network NET -- CMD [ARGS...]", cmdExec)
	cli.RegisterQuery("port", "compute a hashed port offline", "hash --workspace W --module M --service S --endpoint E [--api A] [--mode host|container] [--scope PROJECT]", cmdPort)
}

func cmdPorts(ctx context.Context, c *cli.Env, args []string) error {
	pos, err := c.Parse(c.Flags(), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	ps, err := c.Client.Ports(ctx)
	if err != nil {
		return err
	}
	if c.Project != "" {
		ps = slices.DeleteFunc(ps, func(p api.PortMapping) bool { return !c.InProject(p.Workload) })
	}
	if c.JSON {
		return printJSON(c.Stdout, ps)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tENDPOINT\tAPI\tNETWORK\tPORT\tADDRESSES")
	for _, p := range ps {
		addrs := make([]string, len(p.Instances))
		for i, in := range p.Instances {
			addrs[i] = in.Access + "=" + in.Address
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", p.Workload, p.Endpoint, p.API, p.Network, p.Port, strings.Join(addrs, " "))
	}
	return tw.Flush()
}

// The network documents' view: the isolated networks, with their
// addresses, published ports and workloads.
var _ = registerView(spec.KindNetwork, "list isolated networks, or delete one",
	"NETWORK\tADDRESS\tEGRESS\tPUBLISHED\tWORKLOADS\tPATH", func(n api.Network) string {
		pub := make([]string, len(n.Published))
		for i, p := range n.Published {
			pub[i] = fmt.Sprintf("%d->%s:%d", p.HostPort, p.Workload, p.Port)
		}
		return fmt.Sprintf("%s\t%s\t%t\t%s\t%s\t%s", n.Name, cmp.Or(n.Address, "-"), n.Egress,
			cmp.Or(strings.Join(pub, ","), "-"), cmp.Or(strings.Join(n.Workloads, ","), "-"), n.Path)
	}, func(c *cli.Env, nw api.Network) { fmt.Fprintf(c.Stdout, "network %s egress=%t\n", nw.Name, nw.Egress) })

// cmdExec replaces this process with CMD inside the network's namespace:
// the caller's stdio and environment, and CMD's exit status, pass through
// untouched. The daemon only says where the namespace is.
func cmdExec(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	network := fs.String("network", "", "the isolated network to run in")
	pos, err := c.ParseCommand(fs, args)
	if err != nil {
		return err
	}
	if *network == "" || len(pos) == 0 {
		return cli.Usagef("--network and a command are needed")
	}
	*network = c.FullName(*network)
	ns, err := api.DocumentsOf[api.Network](ctx, c.Client, spec.KindNetwork)
	if err != nil {
		return err
	}
	var path, hosts string
	for _, n := range ns {
		if n.Name == *network {
			path, hosts = n.Path, n.Hosts
		}
	}
	if path == "" {
		return fmt.Errorf("%w: no network named %q", errdefs.ErrNotFound, *network)
	}
	prog, err := exec.LookPath(pos[0])
	if err != nil {
		return err
	}
	c.Client.Close()
	if err := enterNetwork(*network, path, hosts); err != nil {
		return fmt.Errorf("entering network %s: %w", *network, err)
	}
	return syscall.Exec(prog, pos, os.Environ())
}

func cmdPort(ctx context.Context, c *cli.Env, args []string) error {
	fs := c.Flags()
	var in netalloc.HashInput
	fs.StringVar(&in.Workspace, "workspace", "", "workspace")
	fs.StringVar(&in.Module, "module", "", "module")
	fs.StringVar(&in.Service, "service", "", "service")
	fs.StringVar(&in.Endpoint, "endpoint", "", "endpoint name")
	fs.StringVar(&in.API, "api", "tcp", "tcp, http, rest, grpc or other")
	mode := fs.String("mode", "host", "host (native and nix workloads) or container (containerd workloads)")
	scope := fs.String("scope", "", "codefly's naming scope: a project's name (-p), hashed with the endpoint as ENDPOINT-SCOPE")
	pos, err := c.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "hash" {
		return cli.Usagef("only `port hash` exists")
	}
	if in.Workspace == "" || in.Module == "" || in.Service == "" || in.Endpoint == "" {
		return cli.Usagef("--workspace, --module, --service and --endpoint are needed")
	}
	if *scope == "" {
		*scope = c.Project
	}
	if *scope != "" {
		in.Endpoint += "-" + *scope
	}
	switch *mode {
	case "host":
	case "container":
		in.Mode = netalloc.ModeContainer
	default:
		return cli.Usagef("--mode is host or container, not %q", *mode)
	}
	port := netalloc.HashedPort(in)
	if c.JSON {
		return printJSONLine(c.Stdout, map[string]int{"port": port})
	}
	fmt.Fprintln(c.Stdout, strconv.Itoa(port))
	return nil
}

// enterNetwork switches the calling goroutine's thread into the network
// namespace at path for good, as the process is about to execve into the
// command (sandbox.Network.Enter, which the client does not link: its
// netlink alone was a third of the client's size). With hosts, the
// network's /etc/hosts while a run has it, the thread also gets a mount
// namespace of its own where hosts is bound read-only at /etc/hosts, as
// in the network's runs. The thread stays locked, even on error.
func enterNetwork(name, path, hosts string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("network %q does not exist: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("open network %q: %w", name, err)
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return fmt.Errorf("open network %q: %w", name, err)
	}
	if st.Type != unix.NSFS_MAGIC {
		return fmt.Errorf("network %q does not exist (%s is not a mounted namespace): %w", name, path, errdefs.ErrNotFound)
	}
	runtime.LockOSThread()
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network %q: %w", name, err)
	}
	if hosts == "" {
		return nil
	}
	if err := bindHosts(hosts); err != nil {
		return fmt.Errorf("network %q's /etc/hosts: %w", name, err)
	}
	return nil
}

// bindHosts gives the calling thread a mount namespace of its own, whose
// mounts no longer reach the host's, with the file hosts bound read-only
// at /etc/hosts. The file is opened without following a symlink, in the
// new namespace (a bind's source must be of it), and the bind is made
// from that descriptor.
func bindHosts(hosts string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	fd, err := unix.Open(hosts, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	src := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := unix.Mount(src, "/etc/hosts", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", hosts, err)
	}
	if err := unix.Mount("", "/etc/hosts", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("make /etc/hosts read-only: %w", err)
	}
	return nil
}
