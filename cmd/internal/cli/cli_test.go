package cli

import (
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestArgumentRule: flags stand anywhere until the first "--", and nothing
// after it is ever a flag; exec's flags end at its command too.
func TestArgumentRule(t *testing.T) {
	tests := []struct {
		name    string
		command bool // parsed as exec parses: the command's flags are its own
		args    []string
		pos     string
		flags   string
		err     string
	}{
		{name: "logs", args: []string{"web", "-f", "--tail", "3", "--", "-odd-name"}, pos: "web|-odd-name", flags: "f=true tail=3"},
		{name: "logs after --", args: []string{"--tail", "1", "--", "--tail", "9", "-f"}, pos: "--tail|9|-f", flags: "f=false tail=1"},
		{name: "apply", args: []string{"-f", "web.yaml", "--", "--force"}, pos: "--force", flags: "f=web.yaml force=false"},
		{name: "apply flag after name", args: []string{"web", "--force"}, pos: "web", flags: "force=true"},
		{name: "unknown flag", args: []string{"web", "-x"}, err: "flag provided but not defined: -x"},
		{name: "exec pgbench", command: true, args: []string{"--network", "ci-1", "--", "pgbench", "-i", "-h", "127.0.0.1"}, pos: "pgbench|-i|-h|127.0.0.1", flags: "network=ci-1"},
		{name: "exec sh -c", command: true, args: []string{"--network", "ci-1", "--", "sh", "-c", "echo hi"}, pos: "sh|-c|echo hi", flags: "network=ci-1"},
		{name: "exec a flag of ours", command: true, args: []string{"--network", "ci-1", "--", "readlink", "-network", "ci-2", "/proc/self/ns/net"}, pos: "readlink|-network|ci-2|/proc/self/ns/net", flags: "network=ci-1"},
		{name: "exec -json", command: true, args: []string{"--network", "ci-1", "--", "echo", "-json", "hi"}, pos: "echo|-json|hi", flags: "network=ci-1 json=false"},
		{name: "exec without --", command: true, args: []string{"--network", "ci-1", "echo", "-json", "--", "hi"}, pos: "echo|-json|--|hi", flags: "network=ci-1 json=false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Env{Name: "test"}
			fs := c.Flags()
			fs.Bool("f", false, "")
			fs.Int("tail", -1, "")
			fs.Bool("force", false, "")
			fs.String("network", "", "")
			parse := c.Parse
			if tt.command {
				parse = c.ParseCommand
			}
			if strings.HasPrefix(tt.name, "apply") {
				fs = c.Flags()
				fs.String("f", "", "")
				fs.Bool("force", false, "")
			}
			pos, err := parse(fs, tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(pos, "|"); got != tt.pos {
				t.Errorf("positional %q, want %q", got, tt.pos)
			}
			for _, kv := range strings.Fields(tt.flags) {
				k, v, _ := strings.Cut(kv, "=")
				if got := fs.Lookup(k).Value.String(); got != v {
					t.Errorf("flag %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestPorts(t *testing.T) {
	for _, tt := range []struct {
		ps   []api.PortMapping
		want string
	}{
		{nil, "-"},
		{[]api.PortMapping{{Endpoint: "http", Port: 8000, Network: "host"}}, "http:8000"},
		{[]api.PortMapping{{Endpoint: "http", Port: 8000, Published: 18090, Network: "ci-1"}, {Endpoint: "admin", Port: 9000, Network: "ci-1"}}, "http:18090->8000,admin:9000 @ci-1"},
	} {
		if got := Ports(tt.ps); got != tt.want {
			t.Errorf("Ports(%+v) = %q, want %q", tt.ps, got, tt.want)
		}
	}
}
