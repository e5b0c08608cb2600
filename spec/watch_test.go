package spec

import "testing"

func TestIgnoreMatch(t *testing.T) {
	tests := []struct {
		pattern, rel string
		want         bool
	}{
		{"*.log", "app.log", true},
		{"*.log", "logs/app.log", true}, // a part anywhere
		{"*.log", "app.logx", false},
		{"node_modules", "node_modules", true},
		{"node_modules", "web/node_modules/react/index.js", true}, // what is under it too
		{"node_modules", "node_modules_x/a.js", false},
		{"build/*.o", "build/a.o", true},
		{"build/*.o", "src/build/a.o", false}, // with a '/': from the watch's path
		{"build/*.o", "build/sub/a.o", false},
		{"build/**/*.o", "build/sub/deep/a.o", true},
		{"build/**/*.o", "build/a.o", true}, // ** is any number of parts, none too
		{"**/*.tmp", "a/b/c.tmp", true},
		{"**/*.tmp", "c.tmp", true},
		{"dist", "dist/app.js", true},
		{"dist/**", "dist/app.js", true},
		{"docs/*.md", "docs", false},
		{"docs", "docs/x/y.md", true},
		{"a/b", "a/b/c", true}, // a directory matched ignores what is under it
		{"a?c", "abc", true},
		{"[ab].py", "b.py", true},
		{"[ab].py", "c.py", false},
	}
	for _, tt := range tests {
		if got := IgnoreMatch(tt.pattern, tt.rel); got != tt.want {
			t.Errorf("IgnoreMatch(%q, %q) = %v, want %v", tt.pattern, tt.rel, got, tt.want)
		}
	}
}

func TestIgnoredByDefault(t *testing.T) {
	e := Watch{Path: "/src", Ignore: []string{"*.log"}}
	for rel, want := range map[string]bool{
		"app.py":                        false,
		"server.log":                    true,
		".git/index":                    true,
		"pkg/__pycache__/m.cpython.pyc": true,
		".app.py.swp":                   true,
		"app.py~":                       true,
		"4913":                          true,
		".#app.py":                      true,
		"#app.py#":                      true,
		"sub/app.py":                    false,
	} {
		if got := e.Ignored(rel); got != want {
			t.Errorf("Ignored(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestValidateWatch(t *testing.T) {
	tests := []struct {
		name   string
		change func(w *Workload)
		fields []string
	}{
		{"restart", func(w *Workload) { w.Watch = []Watch{{Path: "/srv/app", Action: WatchRestart}} }, nil},
		{"action by default restart", func(w *Workload) { w.Watch = []Watch{{Path: "/srv/app"}}; w.SetDefaults() }, nil},
		{"relative path is the CLI's to resolve", func(w *Workload) { w.Watch = []Watch{{Path: "src", Action: WatchRestart}} }, nil},
		{"no path", func(w *Workload) { w.Watch = []Watch{{Action: WatchRestart}} }, []string{"watch[0].path"}},
		{"unknown action", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: "rebuild"}} }, []string{"watch[0].action"}},
		{"exec", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: WatchExec, Exec: []string{"make"}}} }, nil},
		{"exec without a command", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: WatchExec}} }, []string{"watch[0].exec"}},
		{"a command without exec", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: WatchRestart, Exec: []string{"make"}}} }, []string{"watch[0].exec"}},
		{"exec empty program", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: WatchExec, Exec: []string{""}}} }, []string{"watch[0].exec[0]"}},
		{"sync on native", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: WatchSync, Target: "/app"}} }, []string{"watch[0].action"}},
		{"sync on containerd", func(w *Workload) {
			w.Kind, w.Containerd = KindContainerd, &Containerd{Image: "bbox"}
			w.Reload = nil
			w.Watch = []Watch{{Path: "/a", Action: WatchSync, Target: "/app"}}
		}, nil},
		{"sync without target", func(w *Workload) {
			w.Kind, w.Containerd, w.Reload = KindContainerd, &Containerd{Image: "bbox"}, nil
			w.Watch = []Watch{{Path: "/a", Action: WatchSync}}
		}, []string{"watch[0].target"}},
		{"exec on containerd", func(w *Workload) {
			w.Kind, w.Containerd, w.Reload = KindContainerd, &Containerd{Image: "bbox"}, nil
			w.Watch = []Watch{{Path: "/a", Action: WatchExec, Exec: []string{"make"}}}
		}, []string{"watch[0].action"}},
		{"target without sync", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: WatchRestart, Target: "/app"}} }, []string{"watch[0].target"}},
		{"glob that does not compile", func(w *Workload) {
			w.Watch = []Watch{{Path: "/a", Action: WatchRestart, Ignore: []string{"*.log", "[a-"}}}
		}, []string{"watch[0].ignore[1]"}},
		{"absolute glob", func(w *Workload) { w.Watch = []Watch{{Path: "/a", Action: WatchRestart, Ignore: []string{"/tmp"}}} }, []string{"watch[0].ignore[0]"}},
		{"watching without entries", func(w *Workload) { w.Watching = true }, []string{"watching"}},
		{"watching", func(w *Workload) { w.Watching, w.Watch = true, []Watch{{Path: "/a", Action: WatchRestart}} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := valid()
			tt.change(w)
			err := w.Validate()
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			wantFieldError(t, err, tt.fields)
		})
	}
}

func TestWatchParsed(t *testing.T) {
	ws, err := Parse([]byte(`name: app
command: [/bin/app]
watch:
  - {path: /srv/app, ignore: ["*.log"]}
  - {path: /srv/app/go.mod, action: exec, exec: [make, build]}
watching: true
`))
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	if !w.Watches() || len(w.Watch) != 2 || w.Watch[0].Action != WatchRestart || w.Watch[1].Exec[1] != "build" {
		t.Fatalf("parsed %+v", w.Watch)
	}
	c := w.Clone()
	c.Watch[1].Exec[0] = "x"
	if w.Watch[1].Exec[0] != "make" {
		t.Error("Clone shares the watch's exec")
	}
	if _, err := Parse([]byte("name: app\ncommand: [x]\nwatch: [{path: /a, acton: restart}]\n")); err == nil {
		t.Error("an unknown key of a watch entry accepted")
	}
	off := w.Clone()
	off.Watching = false
	if !OnlyWatchingDiffers(w, off) || OnlyWatchingDiffers(w, w.Clone()) {
		t.Error("OnlyWatchingDiffers")
	}
	off.Watch[0].Ignore = nil
	if OnlyWatchingDiffers(w, off) {
		t.Error("OnlyWatchingDiffers with another ignore")
	}
}
