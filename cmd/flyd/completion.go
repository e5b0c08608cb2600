package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

// Shell completion: `flyd completion SHELL` prints a script that, at each
// TAB, runs `flyd __complete WORDS…` (the words after flyd, the one being
// completed last, maybe empty) and offers what it prints, a candidate a
// line. A line ":files" alone asks the shell to complete a path, and
// ":default" its own completion (a command's, after `--`). Commands and
// their flags come from the command table (cli.Commands, cli.CommandFlags);
// workload, project and network names from the daemon, asked with a short
// timeout: with no daemon there are none, and nothing is said.

func init() {
	cli.RegisterQuery("completion", "print a shell completion script: source <(flyd completion bash)", "bash|zsh|fish", cmdCompletion)
	cli.RegisterHidden("__complete", cmdComplete)
}

// completeTimeout bounds what a completion asks the daemon: a TAB that
// waits longer is worse than one without names.
const completeTimeout = 500 * time.Millisecond

func cmdCompletion(_ context.Context, c *cli.Env, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintf(c.Stderr, "usage: flyd completion %s\n", c.Usage)
		return flag.ErrHelp
	}
	if len(args) != 1 {
		return cli.Usagef("name a shell: bash, zsh or fish")
	}
	script, ok := completionScripts[args[0]]
	if !ok {
		return cli.Usagef("no completion for %q: bash, zsh or fish", args[0])
	}
	_, err := io.WriteString(c.Stdout, script)
	return err
}

func cmdComplete(ctx context.Context, c *cli.Env, args []string) error {
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	for _, s := range complete(ctx, args, daemonNames) {
		fmt.Fprintln(c.Stdout, s)
	}
	return nil
}

// Directives a completion prints alone, for the script to act on.
const (
	completeFiles   = ":files"
	completeDefault = ":default"
)

// nameSource lists the names of what the daemon knows of kind ("workload",
// "project", or a document kind such as "network"), in project (-p's; ""
// for none), as they are written on the command line.
type nameSource func(ctx context.Context, socket, project, kind string) []string

// sharedFlags are the flags every client command takes, also before its
// name (cli's leadingFlags), and whether each takes a value.
var sharedFlags = map[string]bool{"socket": true, "json": false, "p": true, "project": true}

// complete is what `flyd __complete args…` offers: args are the words
// after flyd, the last the one being completed.
func complete(ctx context.Context, args []string, names nameSource) []string {
	if len(args) == 0 {
		args = []string{""}
	}
	cur, words := args[len(args)-1], args[:len(args)-1]
	socket, project := os.Getenv("FLYD_SOCKET"), os.Getenv("FLYD_PROJECT")
	if socket == "" {
		socket = cli.Home().Socket
	}
	// The shared flags before the command's name.
	i := 0
	for ; i < len(words) && strings.HasPrefix(words[i], "-") && words[i] != "-"; i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(words[i], "-"), "=")
		takes, ok := sharedFlags[name]
		if !ok {
			return nil
		}
		if takes && !hasValue && i+1 < len(words) {
			i++
			value = words[i]
		}
		switch name {
		case "socket":
			socket = value
		case "p", "project":
			project = value
		}
	}
	if i == len(words) {
		if i > 0 && sharedFlags[strings.TrimLeft(words[i-1], "-")] && !strings.Contains(words[i-1], "=") {
			return flagValue(ctx, names, socket, project, strings.TrimLeft(words[i-1], "-"), "", cur)
		}
		if strings.HasPrefix(cur, "-") {
			var out []string
			for n := range sharedFlags {
				out = append(out, dashed(n))
			}
			return matching(out, cur)
		}
		var cmds []string
		for n := range cli.Commands() {
			cmds = append(cmds, n)
		}
		return matching(cmds, cur)
	}
	cmd, rest := words[i], words[i+1:]
	usage, ok := cli.Commands()[cmd]
	if !ok {
		return nil
	}
	if mayExecDaemon([]string{cmd}) {
		// Its flags are the daemon program's: only registry's
		// subcommands are offered.
		if cmd == "registry" && len(rest) == 0 {
			return matching([]string{"serve", "ls", "drift"}, cur)
		}
		return nil
	}
	if cmd == "completion" {
		if len(rest) == 0 {
			return matching(slices.Collect(maps.Keys(completionScripts)), cur)
		}
		return nil
	}
	fs, runsCommand := cli.CommandFlags(cmd)
	if fs == nil {
		return nil
	}
	// The command's words: its flags' values, and its positional
	// arguments; after a "--" every word is positional, and for a
	// command that runs a program (exec, run) the program's.
	var pos []string
	for j := 0; j < len(rest); j++ {
		w := rest[j]
		switch {
		case w == "--" && runsCommand:
			return []string{completeDefault}
		case w == "--":
			return positional(ctx, names, socket, project, cmd, usage, append(pos, rest[j+1:]...), cur)
		case !strings.HasPrefix(w, "-") || w == "-":
			if runsCommand {
				return []string{completeDefault}
			}
			pos = append(pos, w)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		f := fs.Lookup(name)
		if f == nil || isBool(f) || hasValue {
			if name == "p" || name == "project" {
				project = value
			}
			continue
		}
		if j+1 == len(rest) {
			return flagValue(ctx, names, socket, project, name, fs.Lookup(name).Usage, cur)
		}
		j++
		switch name {
		case "socket":
			socket = rest[j]
		case "p", "project":
			project = rest[j]
		}
	}
	if strings.HasPrefix(cur, "-") {
		var out []string
		fs.VisitAll(func(f *flag.Flag) { out = append(out, dashed(f.Name)) })
		return matching(out, cur)
	}
	return positional(ctx, names, socket, project, cmd, usage, pos, cur)
}

// positional offers a command's positional argument: a document's name
// after `PLURAL rm`, a workload's where the command's usage says NAME.
func positional(ctx context.Context, names nameSource, socket, project, cmd, usage string, pos []string, cur string) []string {
	for _, k := range spec.DocKinds() {
		if cmd != k.Plural {
			continue
		}
		switch {
		case len(pos) == 0:
			return matching([]string{"rm"}, cur)
		case len(pos) == 1 && pos[0] == "rm":
			return matching(names(ctx, socket, project, k.Name), cur)
		}
		return nil
	}
	if cmd == "port" && len(pos) == 0 {
		return matching([]string{"hash"}, cur)
	}
	if nameArg.MatchString(usage) {
		return matching(names(ctx, socket, project, "workload"), cur)
	}
	return nil
}

// nameArg finds a usage that takes workloads' names.
var nameArg = regexp.MustCompile(`\bNAME\b`)

// flagValue offers the value of flag name, whose usage is given: a
// project's, a network's name, or a path.
func flagValue(ctx context.Context, names nameSource, socket, project, name, usage, cur string) []string {
	switch {
	case name == "p" || name == "project":
		return matching(names(ctx, socket, "", "project"), cur)
	case name == "network":
		return matching(names(ctx, socket, project, spec.KindNetwork), cur)
	case name == "socket" || strings.Contains(usage, "file") || strings.Contains(usage, "director"):
		return []string{completeFiles}
	}
	return nil
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// dashed is a flag as written: -p, --json.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// matching are the candidates that begin with prefix, sorted, each once.
func matching(candidates []string, prefix string) []string {
	var out []string
	for _, c := range candidates {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// daemonNames asks the daemon at socket: the workloads (of project, by
// their bare names, or all of them by their full names), the projects
// that hold any, or a document kind's names. An error is no names.
func daemonNames(ctx context.Context, socket, project, kind string) []string {
	if _, err := os.Stat(socket); err != nil {
		return nil
	}
	client := api.NewClient(socket)
	defer client.Close()
	var full []string
	switch kind {
	case "workload", "project":
		ws, err := client.List(ctx)
		if err != nil {
			return nil
		}
		for _, w := range ws {
			full = append(full, w.Name)
		}
	default:
		docs, err := api.DocumentsOf[named](ctx, client, kind)
		if err != nil {
			return nil
		}
		for _, d := range docs {
			full = append(full, d.Name)
		}
	}
	var out []string
	for _, n := range full {
		p, bare := spec.SplitName(n)
		switch {
		case kind == "project":
			if p != "" {
				out = append(out, p)
			}
		case project == "":
			out = append(out, n)
		case p == project:
			out = append(out, bare)
		}
	}
	return out
}

// completionScripts are the scripts `flyd completion` prints, by shell.
// Each calls the flyd the user typed, so that bin/flyd completes as
// itself.
var completionScripts = map[string]string{
	"bash": `# flyd completion for bash: source <(flyd completion bash)
_flyd() {
    local cur="${COMP_WORDS[COMP_CWORD]}" out
    out=$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
    case "$out" in
    :files)
        compopt -o filenames 2>/dev/null
        local IFS=$'\n'
        COMPREPLY=($(compgen -f -- "$cur"))
        ;;
    :default)
        compopt -o default 2>/dev/null
        COMPREPLY=()
        ;;
    *)
        local IFS=$'\n'
        COMPREPLY=($out)
        ;;
    esac
}
complete -F _flyd flyd
`,
	"zsh": `#compdef flyd
# flyd completion for zsh: source <(flyd completion zsh), after compinit
_flyd() {
    local out
    out=$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
    case "$out" in
    :files) _files ;;
    :default) _normal ;;
    *) local -a cands; cands=("${(@f)out}"); compadd -- "${cands[@]}" ;;
    esac
}
compdef _flyd flyd
`,
	"fish": `# flyd completion for fish: flyd completion fish | source
function __flyd_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l flyd $words[1]
    set -e words[1]
    set -l out ($flyd __complete $words "$cur" 2>/dev/null)
    switch "$out"
        case :files
            __fish_complete_path "$cur"
        case :default
            __fish_complete_subcommand
        case '*'
            printf '%s\n' $out
    end
end
complete -c flyd -f -a '(__flyd_complete)'
`,
}
