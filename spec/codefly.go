package spec

import "strings"

// EndpointVar is the variable codefly's SDKs read a used endpoint's
// address from: CODEFLY__ENDPOINT__<MODULE>__<SERVICE>__<ENDPOINT>__<API>,
// "-" turned to "_" and upper-cased, as codefly-dev/core builds it
// (resources/environment_variables_manager.go, EndpointAsEnvironmentVariableKey).
func EndpointVar(module, service, endpoint, api string) string {
	key := module + "__" + service + "__" + endpoint + "__" + api
	return "CODEFLY__ENDPOINT__" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// ConfigurationVar is the variable codefly's SDKs read a service's
// configuration value from: CODEFLY__SERVICE_CONFIGURATION__<MODULE>__
// <SERVICE>__<NAME>__<KEY> (…_SECRET_CONFIGURATION__… for a secret),
// upper-cased, "-" turned to "_", as codefly-dev/core builds it
// (resources/environment_variables_manager.go).
func ConfigurationVar(module, service, name, key string, secret bool) string {
	prefix := "CODEFLY__SERVICE_CONFIGURATION__"
	if secret {
		prefix = "CODEFLY__SERVICE_SECRET_CONFIGURATION__"
	}
	return prefix + strings.ToUpper(strings.ReplaceAll(module+"__"+service+"__"+name+"__"+key, "-", "_"))
}
