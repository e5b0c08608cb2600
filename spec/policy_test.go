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
	if len(DocsOf[*Policy](d.Docs)) != 1 || len(d.Workloads) != 1 {
		t.Fatalf("read %d policies and %d workloads", len(DocsOf[*Policy](d.Docs)), len(d.Workloads))
	}
	pl := DocsOf[*Policy](d.Docs)[0]
	if pl.Ingress == nil || len(*pl.Ingress) != 1 || (*pl.Ingress)[0].Ports[0].Proto() != ProtocolTCP {
		t.Fatalf("ingress read as %+v", pl.Ingress)
	}
	if pl.Egress == nil || len(*pl.Egress) != 0 {
		t.Fatalf("an empty egress list must deny egress, read as %v", pl.Egress)
	}
	if d, err := ParseAll([]byte("kind: policy\nname: quiet\nselect: {workloads: [a]}\n")); err != nil || DocsOf[*Policy](d.Docs)[0].Ingress != nil || DocsOf[*Policy](d.Docs)[0].Egress != nil {
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
		{base + "egress: [{to: {users: true}}]\n", "egress[0].to.users", "is for ingress"},
	} {
		_, err := ParseAll([]byte(tt.doc))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%q: %v; want %s: …%s…", tt.doc, err, tt.field, tt.says)
		}
	}
}

// TestEndpointReachRules: each contradiction of visibility, exposure and
// publishing is refused by its named rule, on the field it concerns.
func TestEndpointReachRules(t *testing.T) {
	for _, tt := range []struct{ endpoint, network, field, rule string }{
		{"{name: e, port: 80, visibility: module}", "host", "endpoints[0].visibility", "visibility-known"},
		{"{name: e, port: 80, visibility: external}", "host", "endpoints[0].visibility", "visibility-known"},
		{"{name: e, port: 80, visibility: public, exposure: internet}", "host", "endpoints[0].exposure", "exposure-known"},
		{"{name: e, port: 80, visibility: public}", "host", "endpoints[0].exposure", "exposure-declared"},
		{"{name: e, port: 80, exposure: public}", "host", "endpoints[0].exposure", "exposure-within-reach"},
		{"{name: e, port: 80, visibility: private, exposure: public}", "host", "endpoints[0].exposure", "exposure-within-reach"},
		{"{name: e, port: 80, visibility: public, exposure: public}", "ci-1", "endpoints[0].exposure", "exposure-addressed"},
		{"{name: e, port: 80, visibility: public, exposure: none, publish: 8080}", "ci-1", "endpoints[0].publish", "exposure-unpublished"},
		{"{name: e, port: 80, visibility: private, publish: 8080}", "ci-1", "endpoints[0].publish", "private-unpublished"},
		{"{name: e, port: 80, visibility: private}", "host", "endpoints[0].visibility", "private-needs-module"},
	} {
		doc := "name: w\ncommand: [/bin/true]\nnetwork: " + tt.network + "\nendpoints: [" + tt.endpoint + "]\n"
		_, err := ParseAll([]byte(doc))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(err.Error(), "("+tt.rule+")") {
			t.Errorf("%s on %s: %v; want %s refused by %s", tt.endpoint, tt.network, err, tt.field, tt.rule)
		}
	}
	for _, ok := range []string{
		"network: host\nendpoints: [{name: e, port: 80, visibility: public, exposure: public}]",
		"network: ci-1\nendpoints: [{name: e, port: 80, visibility: public, exposure: public, publish: 8080}]",
		"network: ci-1\nendpoints: [{name: e, port: 80, visibility: public, exposure: none}]",
		"network: ci-1\nidentity: {module: billing}\nendpoints: [{name: e, port: 80, visibility: private}]",
		"network: ci-1\nendpoints: [{name: e, port: 80, publish: 8080}]",
		"network: host\nendpoints: [{name: e, port: 80, visibility: none}]",
	} {
		if _, err := ParseAll([]byte("name: w\ncommand: [/bin/true]\n" + ok + "\n")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
