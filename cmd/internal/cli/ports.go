package cli

import (
	"strconv"
	"strings"

	"github.com/flyd-dev/flyd/api"
)

// Ports is how `flyd ps` and `flyd top` write a workload's endpoints:
// ENDPOINT:PORT, or ENDPOINT:HOSTPORT->PORT for one published on the
// host, comma-separated, then @NETWORK for an isolated network's; "-"
// for none. One notation, so that what one shows the other matches.
func Ports(ps []api.PortMapping) string {
	if len(ps) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.Endpoint)
		b.WriteByte(':')
		if p.Location == "external" {
			b.WriteString(p.Address("native"))
			continue
		}
		if p.Published != 0 {
			b.WriteString(strconv.Itoa(p.Published))
			b.WriteString("->")
		}
		b.WriteString(strconv.Itoa(p.Port))
	}
	if n := ps[0].Network; n != "" && n != "host" {
		b.WriteString(" @")
		b.WriteString(n)
	}
	return b.String()
}
