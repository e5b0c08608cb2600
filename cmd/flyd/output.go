package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
	"github.com/flyd-dev/flyd/spec"
)

func printWorkloads(w io.Writer, ws []api.Workload) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tPID\tRESTARTS\tPORTS\tSINCE\tLAST EXIT")
	for _, wl := range ws {
		pid := "-"
		if wl.PID > 0 {
			pid = strconv.Itoa(wl.PID)
		}
		last := "-"
		if wl.LastExit != nil {
			last = wl.LastExit.String()
		}
		state := string(wl.State)
		if wl.State == api.StatePending || wl.State == api.StatePreparing {
			state += " (" + wl.Reason + ")"
		}
		if wl.State == api.StateScheduled && wl.NextStart != nil {
			state += " (next " + when(*wl.NextStart) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", wl.Name, wl.Kind, state, pid,
			wl.Restarts, cli.Ports(wl.Ports), ago(wl.Since), last)
	}
	tw.Flush()
}

// when is a time to come, in the local zone: its time of day, with its
// date when that is not today.
func when(t time.Time) string {
	t, now := t.Local(), time.Now()
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func printStatus(w io.Writer, st *api.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%s\n", st.Version)
	fmt.Fprintf(tw, "pid\t%d\n", st.PID)
	fmt.Fprintf(tw, "uptime\t%s\n", st.Uptime)
	fmt.Fprintf(tw, "workloads\t%d\n", st.Workloads)
	for _, s := range api.States {
		if n := st.States[s]; n > 0 {
			fmt.Fprintf(tw, "  %s\t%d\n", s, n)
		}
	}
	var rts []string
	for _, k := range spec.Kinds {
		if st.Runtimes[string(k)] {
			rts = append(rts, string(k))
		}
	}
	fmt.Fprintf(tw, "runtimes\t%s\n", strings.Join(rts, ", "))
	if st.PublishedPorts != "" {
		fmt.Fprintf(tw, "published ports\t%s\n", st.PublishedPorts)
	}
	for _, p := range st.FileProblems {
		fmt.Fprintf(tw, "bad file\t%s: %s\n", p.File, p.Error)
	}
	for _, q := range st.Quarantined {
		run := "no run"
		if q.PID != 0 {
			run = fmt.Sprintf("its run, pid %d, is kept", q.PID)
		}
		fmt.Fprintf(tw, "quarantined\t%s: %s (%s; apply or rm the name to replace it)\n", q.Name, q.Error, run)
	}
	if r := st.Registry; r.URL == "" {
		fmt.Fprintf(tw, "registry\toff\n")
	} else {
		fmt.Fprintf(tw, "registry\t%s: %d of %d instances registered, %d failing, %d heartbeats\n",
			r.URL, r.Registered, r.Desired, r.Failing, r.Heartbeats)
		if r.LastError != "" {
			fmt.Fprintf(tw, "  last error\t%s\n", r.LastError)
		}
	}
	tw.Flush()
}

func printEvent(w io.Writer, ev api.Event) {
	fmt.Fprintf(w, "%s  %-20s %-8s %-9s %s\n", ev.Time.Format("15:04:05.000"), ev.Workload, ev.Type, ev.State, ev.Message)
}

// removed says that a document (a policy, a network) is gone: as a line,
// or with --json as a result like a batch's.
func removed(c *cli.Env, kind, name string) error {
	if c.JSON {
		return printJSONLine(c.Stdout, map[string]string{"kind": kind, "name": name, "state": "removed"})
	}
	_, err := fmt.Fprintf(c.Stdout, "%s %s removed\n", kind, name)
	return err
}
