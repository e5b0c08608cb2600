package status

import "testing"

// TestSamePorts: an allocation is the same when each endpoint keeps its
// port and its published port, whatever else its mapping says.
func TestSamePorts(t *testing.T) {
	a := []PortMapping{{Endpoint: "http", Port: 8080, Published: 80}, {Endpoint: "admin", Port: 9000}}
	same := []PortMapping{{Endpoint: "http", Port: 8080, Published: 80, Network: "n"}, {Endpoint: "admin", Port: 9000, API: "http"}}
	if !SamePorts(a, same) || !SamePorts(nil, nil) {
		t.Error("the same allocation told apart")
	}
	for _, b := range [][]PortMapping{
		a[:1],
		{{Endpoint: "http", Port: 8081, Published: 80}, a[1]},
		{{Endpoint: "http", Port: 8080}, a[1]},
		{{Endpoint: "web", Port: 8080, Published: 80}, a[1]},
	} {
		if SamePorts(a, b) {
			t.Errorf("%+v taken for %+v", b, a)
		}
	}
}
