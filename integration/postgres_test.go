package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/internal/testenv"
)

// postgres finds Debian's PostgreSQL server and makes a cluster for the
// test under dir, owned by the postgres user.
func postgres(t *testing.T, dir string) (bin, data string) {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	u, err := user.Lookup("postgres")
	if len(bins) == 0 || err != nil {
		testenv.Skip(t, "PostgreSQL is not installed (Debian package postgresql)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	data = filepath.Join(dir, "pgdata")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, uid, gid); err != nil {
		t.Fatal(err)
	}
	initdb := exec.Command(filepath.Join(filepath.Dir(bins[0]), "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	initdb.Dir = "/"
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	return bins[0], data
}

// TestPostgresStopsByItsMaster: with `stop.mode: main`, the fast-shutdown
// signal reaches postgres's master alone, which ends its sessions itself:
// a client in a query hears postgres's own termination, not a cancel, and
// the next start needs no recovery.
func TestPostgresStopsByItsMaster(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	bin, data := postgres(t, d.dir)
	port := freePort(t)
	d.mustCLI(t, "apply", "--wait", "-f", d.writeSpec(t, "pg.yaml", fmt.Sprintf(`
name: pg
command: [%q, "-D", %q, "-k", %q, "-p", "${PORT_PG}", "-c", "listen_addresses=127.0.0.1"]
user: postgres
endpoints: [{name: pg, port: %d}]
health: {tcp: pg}
stop: {signal: SIGINT, mode: main, timeout: 20s}
`, bin, data, data, port)))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := exec.CommandContext(ctx, "psql", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-c", "select pg_sleep(60)")
	var clientErr bytes.Buffer
	client.Stderr = &clientErr
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the client's query running", func() error {
		out, err := exec.Command("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-Atc",
			"select count(*) from pg_stat_activity where query like 'select pg_sleep%'").Output()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	d.mustCLI(t, "stop", "pg")
	_ = client.Wait()
	if msg := clientErr.String(); !strings.Contains(msg, "terminating connection due to administrator command") || strings.Contains(msg, "canceling statement") {
		t.Errorf("the client heard %q, want postgres's own termination", msg)
	}
	d.mustCLI(t, "start", "--wait", "pg")
	logs := d.logs(t, "pg")
	if strings.Contains(logs, "was interrupted") || strings.Contains(logs, "redo starts") {
		t.Errorf("postgres recovered after a stop by its master:\n%s", logs)
	}
	if w := d.get(t, "pg"); w.State != api.StateRunning {
		t.Errorf("pg is %s after its start", w.State)
	}
}
