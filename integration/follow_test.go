package integration

import (
	"fmt"
	"testing"

	"github.com/flyd-dev/flyd/api"
)

// TestAppFollowsRedis: an app whose after entry follows redis is
// restarted after a redis restart, and waits while redis is stopped;
// `down` stops it before redis.
func TestAppFollowsRedis(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	redis := need(t, "redis-server", "redis-server")
	port := freePort(t)
	d.mustCLI(t, "up", "-p", "fo", "--wait", "-f", d.writeSpec(t, "stack.yaml", fmt.Sprintf(`
name: redis
command: [%q, --port, "${PORT_REDIS}", --bind, 127.0.0.1, --save, "", --appendonly, "no", --dir, /tmp]
endpoints: [{name: redis, port: %d}]
health: {tcp: redis, send: "PING\r\n", expect: "+PONG", interval: 100ms}
---
name: app
uses: [redis]
after: ["redis:healthy+restart"]
command: ["@PROG@", signals]
`, redis, port)))
	app := d.get(t, "fo.app")
	d.mustCLI(t, "-p", "fo", "restart", "redis")
	d.waitWorkload(t, "fo.app", "a new run after redis's restart", func(w *api.Workload) bool {
		return w.State == api.StateRunning && w.PID != app.PID
	})
	d.mustCLI(t, "-p", "fo", "stop", "redis")
	if w := d.waitState(t, "fo.app", api.StatePending); w.Reason != "waiting for fo.redis" {
		t.Errorf("app while redis is stopped: %s (%s); want pending, waiting for fo.redis", w.State, w.Reason)
	}
	d.mustCLI(t, "-p", "fo", "start", "redis")
	d.waitState(t, "fo.app", api.StateRunning)
	d.mustCLI(t, "down", "-p", "fo")
}
