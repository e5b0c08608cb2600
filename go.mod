module github.com/flyd-dev/flyd

go 1.26.0

require (
	github.com/vishvananda/netlink v1.3.1
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.50.0
)

require (
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
