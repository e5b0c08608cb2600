package top

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/spec"
)

// view is what the table shows.
type view int

const (
	workloadsView view = iota
	networksView
	portsView
)

// sortKeys are the orders the workloads table cycles through.
var sortKeys = []string{"name", "state", "cpu", "memory", "restarts"}

const (
	keepLines  = 500 // of the selected workload's log
	keepEvents = 200
)

type model struct {
	ctx   context.Context
	c     *api.Client
	feeds *feeds

	width, height int
	view          view
	sortBy        int
	filter        string

	workloads []api.Workload
	networks  []api.Network
	usage     map[string]usage
	shown     []api.Workload // workloads, filtered and sorted
	selected  string         // the selected workload's name

	logOf  string
	logs   []string
	events []api.Event

	connected bool
	status    string // the last action's outcome, or why the daemon is away

	// prompt, when set, asks a question on the bottom line: a yes/no
	// before a destructive action, a signal's name, a filter.
	prompt *prompt
}

// usage is a workload's CPU use between two samples and its memory.
type usage struct {
	cpu    float64 // cores busy
	memory int64
	procs  int
	total  float64 // CPU seconds at the last sample
	at     time.Time
}

type prompt struct {
	question string
	input    *textinput.Model // nil for a yes/no
	yes      func(answer string) tea.Cmd
}

func newModel(ctx context.Context, c *api.Client) *model {
	return &model{ctx: ctx, c: c, usage: map[string]usage{}, status: "connecting to the daemon…"}
}

// Init starts the one chain of usage samples: each asks for the next.
func (m *model) Init() tea.Cmd { return func() tea.Msg { return statsDueMsg{} } }

// statsTick asks for the next sample once the daemon has one.
func statsTick(every time.Duration) tea.Cmd {
	return tea.Tick(every, func(time.Time) tea.Msg { return statsDueMsg{} })
}

type statsDueMsg struct{}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		return m, m.key(msg)
	case connectedMsg:
		if strings.HasPrefix(m.status, "the daemon went away") {
			m.status = "reconnected to the daemon"
		} else if !m.connected {
			m.status = ""
		}
		m.connected = true
		m.logOf = "" // followed again below, the stream ended with the daemon
	case goneMsg:
		if m.connected || !strings.HasPrefix(m.status, "the daemon") {
			m.status = "the daemon went away; reconnecting…"
		}
		m.connected = false
	case snapshotMsg:
		m.workloads, m.networks = msg.workloads, msg.networks
	case statsMsg:
		if msg.stats == nil {
			return m, statsTick(time.Second)
		}
		m.takeStats(msg.stats)
		m.arrange()
		return m, statsTick(max(time.Duration(msg.stats.IntervalMS)*time.Millisecond, time.Second))
	case statsDueMsg:
		m.feeds.stats()
	case eventMsg:
		m.events = append(m.events, msg.ev)
		if len(m.events) > keepEvents {
			m.events = m.events[len(m.events)-keepEvents:]
		}
	case logLineMsg:
		if msg.workload == m.logOf {
			m.logs = append(m.logs, msg.line)
			if len(m.logs) > keepLines {
				m.logs = m.logs[len(m.logs)-keepLines:]
			}
		}
	case doneMsg:
		if msg.err != nil {
			m.status = msg.what + ": " + msg.err.Error()
		} else {
			m.status = msg.what + ": done"
		}
	}
	m.arrange()
	return m, nil
}

// takeStats turns a sample into rates against the one before.
func (m *model) takeStats(st *api.Stats) {
	next := map[string]usage{}
	for _, u := range st.Workloads {
		n := usage{memory: u.MemoryBytes, procs: u.Processes, total: u.CPUSeconds, at: st.At}
		if prev, ok := m.usage[u.Workload]; ok && st.At.After(prev.at) && u.CPUSeconds >= prev.total {
			n.cpu = (u.CPUSeconds - prev.total) / st.At.Sub(prev.at).Seconds()
		}
		next[u.Workload] = n
	}
	m.usage = next
}

// arrange filters and sorts the table, keeps a selection, and follows
// the selected workload's log.
func (m *model) arrange() {
	m.shown = m.shown[:0]
	for _, w := range m.workloads {
		if m.filter == "" || strings.Contains(w.Name, m.filter) || strings.Contains(string(w.State), m.filter) {
			m.shown = append(m.shown, w)
		}
	}
	key := sortKeys[m.sortBy]
	sort.SliceStable(m.shown, func(i, j int) bool {
		a, b := m.shown[i], m.shown[j]
		switch key {
		case "state":
			if a.State != b.State {
				return a.State < b.State
			}
		case "cpu":
			if x, y := m.usage[a.Name].cpu, m.usage[b.Name].cpu; x != y {
				return x > y
			}
		case "memory":
			if x, y := m.usage[a.Name].memory, m.usage[b.Name].memory; x != y {
				return x > y
			}
		case "restarts":
			if a.Restarts != b.Restarts {
				return a.Restarts > b.Restarts
			}
		}
		return a.Name < b.Name
	})
	if m.index() < 0 {
		m.selected = ""
		if len(m.shown) > 0 {
			m.selected = m.shown[0].Name
		}
	}
	if m.connected && m.selected != m.logOf && m.feeds != nil {
		m.logOf, m.logs = m.selected, nil
		m.feeds.follow(m.selected, keepLines)
	}
}

func (m *model) index() int {
	for i, w := range m.shown {
		if w.Name == m.selected {
			return i
		}
	}
	return -1
}

func (m *model) move(by int) {
	if len(m.shown) == 0 {
		return
	}
	i := min(max(m.index()+by, 0), len(m.shown)-1)
	m.selected = m.shown[i].Name
}

func (m *model) key(k tea.KeyMsg) tea.Cmd {
	// Keys typed faster than they are read come as one message: each is
	// a key of its own.
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste {
		var cmds []tea.Cmd
		for _, r := range k.Runes {
			cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}}))
		}
		return tea.Batch(cmds...)
	}
	if m.prompt != nil {
		return m.answer(k)
	}
	name := m.selected
	switch k.String() {
	case "q", "ctrl+c":
		return tea.Quit
	case "up", "k":
		m.move(-1)
	case "down", "j":
		m.move(1)
	case "home", "g":
		m.move(-len(m.shown))
	case "end", "G":
		m.move(len(m.shown))
	case "w":
		m.view = workloadsView
	case "n":
		m.view = networksView
	case "p":
		m.view = portsView
	case "o":
		m.sortBy = (m.sortBy + 1) % len(sortKeys)
	case "/":
		m.ask("filter: ", m.filter, func(a string) tea.Cmd { m.filter = a; return nil })
	case "esc":
		m.filter = ""
	case "s":
		m.run(name, "start", func(ctx context.Context) error { _, err := m.c.Start(ctx, name); return err })
	case "R":
		m.run(name, "reload", func(ctx context.Context) error {
			_, err := m.c.Batch(ctx, api.ActionReload, api.Batch{Names: []string{name}})
			return err
		})
	case "S":
		m.confirm(name, "stop", func(ctx context.Context) error { _, err := m.c.Stop(ctx, name); return err })
	case "r":
		m.confirm(name, "restart", func(ctx context.Context) error { _, err := m.c.Restart(ctx, name); return err })
	case "d":
		m.confirm(name, "remove", func(ctx context.Context) error { return m.c.Remove(ctx, name, api.RemoveOptions{}) })
	case "x":
		if name != "" {
			m.ask("signal for "+name+": ", "HUP", func(a string) tea.Cmd {
				sig, err := spec.ParseSignal(a)
				if err != nil {
					m.status = err.Error()
					return nil
				}
				m.run(name, "signal "+a, func(ctx context.Context) error { return m.c.Signal(ctx, name, sig) })
				return nil
			})
		}
	}
	m.arrange()
	return nil
}

func (m *model) run(name, what string, do func(ctx context.Context) error) {
	if name == "" || m.view != workloadsView {
		return
	}
	m.status = what + " " + name + "…"
	m.feeds.act(what+" "+name, do)
}

func (m *model) confirm(name, what string, do func(ctx context.Context) error) {
	if name == "" || m.view != workloadsView {
		return
	}
	m.prompt = &prompt{question: fmt.Sprintf("%s %s? [y/N] ", what, name), yes: func(string) tea.Cmd {
		m.run(name, what, do)
		return nil
	}}
}

func (m *model) ask(question, initial string, yes func(string) tea.Cmd) {
	in := textinput.New()
	in.Prompt = ""
	in.SetValue(initial)
	in.Focus()
	m.prompt = &prompt{question: question, input: &in, yes: yes}
}

func (m *model) answer(k tea.KeyMsg) tea.Cmd {
	p := m.prompt
	if p.input == nil {
		m.prompt = nil
		if k.String() == "y" || k.String() == "Y" {
			return p.yes("")
		}
		m.status = "cancelled"
		return nil
	}
	switch k.String() {
	case "enter":
		m.prompt = nil
		cmd := p.yes(strings.TrimSpace(p.input.Value()))
		m.arrange()
		return cmd
	case "esc", "ctrl+c":
		m.prompt = nil
		return nil
	}
	in, cmd := p.input.Update(k)
	p.input = &in
	return cmd
}
