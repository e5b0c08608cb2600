package top

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/cmd/internal/cli"
)

var (
	titleStyle    = lipgloss.NewStyle().Bold(true)
	headStyle     = lipgloss.NewStyle().Bold(true).Underline(true)
	selectedStyle = lipgloss.NewStyle().Reverse(true)
	dimStyle      = lipgloss.NewStyle().Faint(true)
	warnStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	stateStyles   = map[api.State]lipgloss.Style{
		api.StateRunning: lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		api.StateFailed:  lipgloss.NewStyle().Foreground(lipgloss.Color("1")),
		api.StateBackoff: lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
		api.StateUnknown: lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
	}
)

// keysHelp is the footer: every key, short enough for 80 columns.
const keysHelp = "↑↓ select  s start  S stop  r restart  R reload  x signal  d remove  / filter  o sort  w/n/p view  q quit"

func (m *model) View() string {
	if m.width == 0 {
		return ""
	}
	w, h := m.width, m.height
	var b strings.Builder
	line := func(s string) { b.WriteString(fit(s, w) + "\n") }

	header := titleStyle.Render("flyd top") + fmt.Sprintf("  %d workloads  sort: %s", len(m.workloads), sortKeys[m.sortBy])
	if m.filter != "" {
		header += "  filter: " + m.filter
	}
	if !m.connected {
		header += "  " + warnStyle.Render("DISCONNECTED")
	}
	line(header)

	// The table takes what the panes below leave it: at least 4 rows.
	panes := max((h-4)/2, 5)
	rows := max(h-2-panes-2, 4)
	for _, r := range m.table(w, rows+1) {
		line(r)
	}
	line(dimStyle.Render(strings.Repeat("─", w)))

	// The selected workload's log beside the recent events; stacked
	// when the terminal is too narrow for both.
	logW := w
	if w >= 100 {
		logW = w * 3 / 5
	}
	logLines := m.logPane(logW, panes)
	if logW < w {
		evLines := m.eventPane(w-logW-1, panes)
		for i := range panes {
			line(pad(logLines[i], logW) + dimStyle.Render("│") + evLines[i])
		}
	} else {
		half := panes / 2
		for _, l := range m.logPane(w, panes-half) {
			line(l)
		}
		for _, l := range m.eventPane(w, half) {
			line(l)
		}
	}
	switch {
	case m.prompt != nil && m.prompt.input != nil:
		b.WriteString(fit(m.prompt.question+m.prompt.input.View(), w))
	case m.prompt != nil:
		b.WriteString(fit(warnStyle.Render(m.prompt.question), w))
	case m.status != "":
		b.WriteString(fit(m.status, w))
	default:
		b.WriteString(fit(dimStyle.Render(keysHelp), w))
	}
	return b.String()
}

// table is the current view's header and rows, rows lines in all.
func (m *model) table(w, rows int) []string {
	var head string
	var body []string
	sel := -1
	switch m.view {
	case workloadsView:
		head = fmt.Sprintf("%-16s %-10s %-9s %-7s %3s %5s %6s %7s  %s", "NAME", "KIND", "STATE", "HEALTH", "RST", "CPU%", "MEM", "PID", "PORTS")
		for i, wl := range m.shown {
			if wl.Name == m.selected {
				sel = i
			}
			u := m.usage[wl.Name]
			cpu, mem := "-", "-"
			if _, ok := m.usage[wl.Name]; ok {
				cpu, mem = fmt.Sprintf("%.1f", 100*u.cpu), bytesOf(u.memory)
			}
			pid := "-"
			if wl.PID > 0 {
				pid = strconv.Itoa(wl.PID)
			}
			state := fmt.Sprintf("%-9s", wl.State)
			if st, ok := stateStyles[wl.State]; ok && i != sel {
				state = st.Render(state)
			}
			body = append(body, fmt.Sprintf("%-16s %-10s %s %-7s %3d %5s %6s %7s  %s",
				fit(wl.Name, 16), wl.Kind, state, health(wl), wl.Restarts, cpu, mem, pid, cli.Ports(wl.Ports)))
		}
	case networksView:
		head, body = networkRows(m.networks, w)
	case portsView:
		head = fmt.Sprintf("%-18s %-10s %-6s %-10s %6s  %s", "WORKLOAD", "ENDPOINT", "API", "NETWORK", "PORT", "ADDRESSES")
		for _, wl := range m.shown {
			for _, p := range wl.Ports {
				addrs := make([]string, len(p.Instances))
				for i, in := range p.Instances {
					addrs[i] = in.Access + "=" + in.Address
				}
				body = append(body, fmt.Sprintf("%-18s %-10s %-6s %-10s %6d  %s", fit(wl.Name, 18), p.Endpoint, p.API, p.Network, p.Port, strings.Join(addrs, " ")))
			}
		}
	}
	out := []string{headStyle.Render(fit(head, w))}
	// Scrolled so that the selection stays in sight.
	first := 0
	if sel >= rows-1 {
		first = sel - (rows - 2)
	}
	for i := first; i < len(body) && len(out) < rows; i++ {
		r := fit(body[i], w)
		if i == sel {
			r = selectedStyle.Render(pad(r, w))
		}
		out = append(out, r)
	}
	if len(body) == 0 {
		out = append(out, dimStyle.Render("(none)"))
	}
	for len(out) < rows {
		out = append(out, "")
	}
	return out
}

// networkRows is the networks view in w columns. The workloads come
// before what is published, which can be long (a host port per
// endpoint): they take what they need, up to half of what the fixed
// columns leave, and the published ports the rest, cut at the edge.
func networkRows(ns []api.Network, w int) (head string, body []string) {
	const fixed = 18 + 1 + 15 + 1 + 6 + 1 // NETWORK ADDRESS EGRESS and their gaps
	users, pubs := make([]string, len(ns)), make([]string, len(ns))
	usersW := len("WORKLOADS")
	for i, n := range ns {
		users[i] = or(strings.Join(n.Workloads, ","))
		pub := make([]string, len(n.Published))
		for j, p := range n.Published {
			pub[j] = fmt.Sprintf("%d->%s:%d", p.HostPort, p.Workload, p.Port)
		}
		pubs[i] = or(strings.Join(pub, ","))
		usersW = max(usersW, len(users[i]))
	}
	usersW = min(usersW, max((w-fixed)/2, len("WORKLOADS")))
	row := func(name, addr, egress, users, pub string) string {
		return fmt.Sprintf("%-18s %-15s %-6s %s %s", fit(name, 18), addr, egress, pad(fit(users, usersW), usersW), pub)
	}
	head = row("NETWORK", "ADDRESS", "EGRESS", "WORKLOADS", "PUBLISHED")
	for i, n := range ns {
		body = append(body, row(n.Name, or(n.Address), strconv.FormatBool(n.Egress), users[i], pubs[i]))
	}
	return head, body
}

func (m *model) logPane(w, h int) []string {
	title := "log"
	if m.logOf != "" {
		title = "log of " + m.logOf
	}
	return pane(title, m.logs, w, h)
}

func (m *model) eventPane(w, h int) []string {
	lines := make([]string, len(m.events))
	for i, ev := range m.events {
		lines[i] = fmt.Sprintf("%s %s %s %s %s", ev.Time.Local().Format("15:04:05"), ev.Workload, ev.Type, ev.State, ev.Message)
	}
	return pane("events", lines, w, h)
}

// pane is a titled box of the last lines that fit, h lines in all.
func pane(title string, lines []string, w, h int) []string {
	out := []string{headStyle.Render(fit(title, w))}
	if n := h - 1; len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		out = append(out, fit(strings.ReplaceAll(l, "\t", "    "), w))
	}
	for len(out) < h {
		out = append(out, "")
	}
	return out
}

func health(w api.Workload) string {
	switch {
	case w.Healthy == nil:
		return "-"
	case *w.Healthy:
		return "ok"
	}
	return "failing"
}

func bytesOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%dK", n>>10)
}

func or(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fit cuts s, styles and all, to w columns.
func fit(s string, w int) string { return ansi.Truncate(s, w, "…") }

// pad fills s to w columns.
func pad(s string, w int) string {
	if n := w - ansi.StringWidth(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}
