package spec

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		yaml string // value of restart.window as written in YAML
		want time.Duration
		err  string
	}{
		{"250ms", 250 * time.Millisecond, ""},
		{"10s", 10 * time.Second, ""},
		{"1m", time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{`"2s"`, 2 * time.Second, ""},
		{"10", 0, `no unit: add one, like "10s"`},
		{"1.5", 0, "no unit"},
		{`"10"`, 0, "no unit"},
		{"ten seconds", 0, `invalid duration "ten seconds"`},
		{"true", 0, "expected a duration"},
		{"[1s]", 0, "expected a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			ws, err := Parse([]byte(minimal + "restart: {window: " + tt.yaml + "}\n"))
			if tt.err != "" {
				wantFieldError(t, err, []string{"restart.window"}, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ws[0].Restart.Window.Std(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		json string
	}{
		{250 * time.Millisecond, `"250ms"`},
		{time.Minute, `"1m"`},
		{2 * time.Hour, `"2h"`},
		{90 * time.Second, `"1m30s"`},
		{0, `"0s"`},
	} {
		b, err := json.Marshal(Duration{tt.d})
		if err != nil || string(b) != tt.json {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tt.d, b, err, tt.json)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back.Std() != tt.d {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", b, back, err, tt.d)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte("30"), &d); err == nil {
		t.Error("Unmarshal(30) accepted a bare number")
	}
}

func TestSize(t *testing.T) {
	tests := []struct {
		yaml string // value of resources.memory_max as written in YAML
		want Size
		err  string
	}{
		{"1048576", 1 << 20, ""},
		{`"1048576"`, 1 << 20, ""},
		{"256Mi", 256 << 20, ""},
		{"1Ki", 1024, ""},
		{"2Gi", 2 << 30, ""},
		{"1Ti", 1 << 40, ""},
		{"1K", 1000, ""},
		{"5M", 5_000_000, ""},
		{"3G", 3_000_000_000, ""},
		{"1T", 1_000_000_000_000, ""},
		{"0", 0, ""},
		{"1.5Gi", 0, "invalid size"},
		{"1.5", 0, "invalid size 1.5"},
		{"256MB", 0, "invalid size"},
		{"Mi", 0, "invalid size"},
		{"256 Mi", 0, "invalid size"},
		{"9000000Ti", 0, "too large"},
		{"true", 0, "expected a size"},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			ws, err := Parse([]byte(minimal + "resources: {memory_max: " + tt.yaml + "}\n"))
			if tt.err != "" {
				wantFieldError(t, err, []string{"resources.memory_max"}, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ws[0].Resources.MemoryMax; got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSizeFormat(t *testing.T) {
	for _, tt := range []struct {
		s          Size
		str, json_ string
	}{
		{256 << 20, "256Mi", "268435456"},
		{1536, "1536", "1536"},
		{3 << 30, "3Gi", "3221225472"},
		{1000, "1000", "1000"},
		{0, "0", "0"},
	} {
		b, _ := json.Marshal(tt.s)
		if tt.s.String() != tt.str || string(b) != tt.json_ {
			t.Errorf("Size(%d): String() = %q, JSON = %s; want %q, %s", int64(tt.s), tt.s, b, tt.str, tt.json_)
		}
	}
}

func TestPort(t *testing.T) {
	tests := []struct {
		yaml string // value of endpoints[0].port as written in YAML
		want Port
		json string // how it marshals back
		err  string
	}{
		{"hashed", Port{Mode: PortHashed}, `"hashed"`, ""},
		{"ephemeral", Port{Mode: PortEphemeral}, `"ephemeral"`, ""},
		{"8080", FixedPort(8080), "8080", ""},
		{`"8080"`, FixedPort(8080), "8080", ""},
		{"null", Port{Mode: PortHashed}, `"hashed"`, ""},
		{"Hashed", Port{}, "", `got "Hashed"`},
		{"fixed", Port{}, "", `got "fixed"`},
		{"80.5", Port{}, "", `got "80.5"`},
		{"[80]", Port{}, "", "got a list"},
		{"0", Port{}, "", "must be between 1 and 65535"},
		{"65536", Port{}, "", "must be between 1 and 65535"},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			ws, err := Parse([]byte(minimal + "endpoints: [{name: web, port: " + tt.yaml + "}]\n"))
			if tt.err != "" {
				wantFieldError(t, err, []string{"endpoints[0].port"}, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ws[0].Endpoints[0].Port
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			b, err := json.Marshal(got)
			if err != nil || string(b) != tt.json {
				t.Errorf("Marshal = %s, %v; want %s", b, err, tt.json)
			}
			var back Port
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Errorf("Unmarshal(%s) = %+v, %v", b, back, err)
			}
		})
	}
	// An unset port is left out rather than written as null.
	b, _ := json.Marshal(Endpoint{Name: "a"})
	if strings.Contains(string(b), "port") {
		t.Errorf("unset port marshaled: %s", b)
	}
}
