package spec

import (
	"errors"
	"strings"
	"testing"
)

func TestPolicyDocuments(t *testing.T) {
	d, err := ParseAll([]byte(`
kind: policy
name: db-in
select: {networks: [db]}
ingress:
  - from: {networks: [web], cidrs: [198.18.0.0/15]}
    ports: [{port: 5432}, {protocol: icmp}]
egress: []
---
name: w
command: [/bin/true]
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Policies) != 1 || len(d.Workloads) != 1 {
		t.Fatalf("read %d policies and %d workloads", len(d.Policies), len(d.Workloads))
	}
	pl := d.Policies[0]
	if pl.Ingress == nil || len(*pl.Ingress) != 1 || (*pl.Ingress)[0].Ports[0].Proto() != ProtocolTCP {
		t.Fatalf("ingress read as %+v", pl.Ingress)
	}
	if pl.Egress == nil || len(*pl.Egress) != 0 {
		t.Fatalf("an empty egress list must deny egress, read as %v", pl.Egress)
	}
	if d, err := ParseAll([]byte("kind: policy\nname: quiet\nselect: {workloads: [a]}\n")); err != nil || d.Policies[0].Ingress != nil || d.Policies[0].Egress != nil {
		t.Fatalf("a policy without directions: %+v, %v; want both left alone", d, err)
	}
}

func TestPolicyRefusals(t *testing.T) {
	base := "kind: policy\nname: p\nselect: {networks: [db]}\n"
	for _, tt := range []struct{ doc, field, says string }{
		{base + "ingress: [{from: {cidrs: [10.0.0.300/8]}}]\n", "ingress[0].from.cidrs[0]", "not a CIDR"},
		{base + "ingress: [{from: {cidrs: [10.1.2.3/8]}}]\n", "ingress[0].from.cidrs[0]", "did you mean 10.0.0.0/8"},
		{base + "egress: [{to: {cidrs: ['fd00::/8']}}]\n", "egress[0].to.cidrs[0]", "IPv6"},
		{base + "egress: [{to: {cidrs: [0.0.0.0/0]}, ports: [{port: 70000}]}]\n", "egress[0].ports[0].port", "1 to 65535"},
		{base + "egress: [{to: {cidrs: [0.0.0.0/0]}, ports: [{port: 53, protocol: sctp}]}]\n", "egress[0].ports[0].protocol", "tcp, udp or icmp"},
		{base + "egress: [{to: {cidrs: [0.0.0.0/0]}, ports: [{port: 1, protocol: icmp}]}]\n", "egress[0].ports[0].port", "icmp has no ports"},
		{base + "egress: [{to: {dns: [apt.example.org]}}]\n", "egress[0].to.dns", "addresses, not names"},
		{base + "ingress: [{from: {}}]\n", "ingress[0].from", "0.0.0.0/0 for anywhere"},
		{"kind: policy\nname: p\nselect: {}\n", "select", "selects nothing"},
		{"kind: policy\nname: p\nselect: {networks: [host]}\n", "select.networks[0]", "not \"host\""},
		{base + "ingres: []\n", "ingres", "unknown field"},
	} {
		_, err := ParseAll([]byte(tt.doc))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%q: %v; want %s: …%s…", tt.doc, err, tt.field, tt.says)
		}
	}
}
