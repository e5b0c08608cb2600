// Package top is `flyd top`: a full-screen client of the daemon's API
// that shows every workload live, with the selected one's log and the
// recent events, and acts on the selected workload.
//
// It is driven by the daemon, not by a timer: the event stream says when
// the workloads changed, and usage is read once per the daemon's own
// sampling interval. When the daemon goes away (a restart) it says so,
// reconnects, and resumes the events after the last one it had.
package top

import (
	"context"
	"io"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/flyd-dev/flyd/api"
)

// Run shows the dashboard on in and out until the user quits or ctx is
// done, of every workload, or of one project's when project is not nil.
// The terminal is restored as it was on every way out: a quit, an
// interrupt, an error, a panic.
func Run(ctx context.Context, c *api.Client, project *string, in io.Reader, out io.Writer) error {
	// Colours as the terminal offers them, none under NO_COLOR. The
	// terminal is one (the caller checked): termenv's guess that none is
	// when CI is set does not hold here.
	lipgloss.SetColorProfile(termenv.NewOutput(out, termenv.WithTTY(true)).EnvColorProfile())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := newModel(ctx, c)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	m.feeds = newFeeds(ctx, c, p.Send)
	m.feeds.project = project
	m.feeds.connect(keepEvents)
	_, err := p.Run()
	cancel()
	m.feeds.wait()
	if err == tea.ErrProgramKilled && ctx.Err() != nil {
		return nil
	}
	return err
}
