package spec

import "testing"

// TestEndpointVar: the names of used endpoints' variables are codefly's,
// built as codefly-dev/core v0.3.8 builds them
// (resources/environment_variables_manager.go,
// EndpointAsEnvironmentVariableKey: module, service, endpoint name and
// API joined by "__", "-" turned to "_", upper-cased; its own test,
// resources/endpoint_test.go TestEnvironmentVariables, expects
// CODEFLY__ENDPOINT__MOD__ORGANIZATION__REST__REST).
func TestEndpointVar(t *testing.T) {
	for _, tt := range []struct{ module, service, endpoint, api, want string }{
		{"mod", "organization", "rest", "rest", "CODEFLY__ENDPOINT__MOD__ORGANIZATION__REST__REST"},
		{"store", "pg-main", "http", "http", "CODEFLY__ENDPOINT__STORE__PG_MAIN__HTTP__HTTP"},
		{"my-mod", "api-gw", "grpc-in", "grpc", "CODEFLY__ENDPOINT__MY_MOD__API_GW__GRPC_IN__GRPC"},
	} {
		if got := EndpointVar(tt.module, tt.service, tt.endpoint, tt.api); got != tt.want {
			t.Errorf("EndpointVar(%q, %q, %q, %q) = %s, want %s", tt.module, tt.service, tt.endpoint, tt.api, got, tt.want)
		}
	}
}
