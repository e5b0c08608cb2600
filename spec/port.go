package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// PortMode says how an endpoint's port number is chosen.
type PortMode string

const (
	// PortHashed derives a stable port from the workload's identity and the
	// endpoint name, so it survives restarts and host reboots.
	PortHashed PortMode = "hashed"
	// PortEphemeral takes any free port at each start.
	PortEphemeral PortMode = "ephemeral"
	// PortFixed uses Port.Number.
	PortFixed PortMode = "fixed"
)

// Port is written as "hashed", "ephemeral" or a port number (a numeric
// string such as "8080" is accepted too) and marshals back the same way.
// The zero Port means "not set" and becomes hashed in SetDefaults.
type Port struct {
	Mode   PortMode
	Number int // only for PortFixed
}

// FixedPort returns the Port for a fixed number.
func FixedPort(n int) Port { return Port{Mode: PortFixed, Number: n} }

func (p Port) String() string {
	if p.Mode == PortFixed {
		return strconv.Itoa(p.Number)
	}
	return string(p.Mode)
}

func (p Port) MarshalJSON() ([]byte, error) {
	switch p.Mode {
	case "":
		return []byte("null"), nil
	case PortFixed:
		return strconv.AppendInt(nil, int64(p.Number), 10), nil
	}
	return json.Marshal(string(p.Mode))
}

func (p *Port) UnmarshalJSON(data []byte) error { return unmarshalScalar(data, p) }

func (p *Port) decodeScalar(kind nodeKind, text string) error {
	switch kind {
	case stringNode:
		if text == string(PortHashed) || text == string(PortEphemeral) {
			*p = Port{Mode: PortMode(text)}
			return nil
		}
		fallthrough
	case numberNode:
		n, err := strconv.Atoi(text)
		if err != nil {
			return fmt.Errorf("expected \"hashed\", \"ephemeral\" or a port number, got %q", text)
		}
		*p = FixedPort(n)
		return nil
	}
	return fmt.Errorf("expected \"hashed\", \"ephemeral\" or a port number, got %s", kind)
}
