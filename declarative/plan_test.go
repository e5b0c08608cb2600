package declarative

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flyd-dev/flyd/spec"
)

func TestMakePlan(t *testing.T) {
	x1 := &spec.Workload{Name: "x", Command: []string{"/bin/v1"}}
	x2 := &spec.Workload{Name: "x", Command: []string{"/bin/v2"}}
	y1 := &spec.Workload{Name: "y", Command: []string{"/bin/v1"}}
	bad := errors.New("malformed")
	good := func(name string, ws ...*spec.Workload) fileState { return fileState{name: name, ws: ws} }
	broken := func(name string) fileState { return fileState{name: name, err: bad} }

	for _, tc := range []struct {
		name     string
		files    []fileState
		lastGood map[string]fileState
		cur      map[string]applied[*spec.Workload]
		want     string // puts and deletes, then "file: problem" lines
	}{
		{name: "nothing to do", files: []fileState{good("a", x1)}, cur: map[string]applied[*spec.Workload]{"x": {"a", x1}}},
		{name: "new", files: []fileState{good("a", x1)}, want: "put x a"},
		{name: "changed", files: []fileState{good("a", x2)}, cur: map[string]applied[*spec.Workload]{"x": {"a", x1}}, want: "put x a"},
		{name: "unknown spec is put again", files: []fileState{good("a", x1)}, cur: map[string]applied[*spec.Workload]{"x": {owner: "a"}}, want: "put x a"},
		{name: "moved to another file", files: []fileState{good("b", x1)}, cur: map[string]applied[*spec.Workload]{"x": {"a", x1}}, want: "delete x a\nput x b"},
		{name: "file gone", cur: map[string]applied[*spec.Workload]{"x": {"a", x1}, "y": {"b", y1}}, want: "delete x a\ndelete y b"},
		{name: "bad file keeps what it owns", files: []fileState{broken("a")}, cur: map[string]applied[*spec.Workload]{"x": {owner: "a"}},
			want: "a: malformed"},
		{name: "bad file keeps its last good names from others", files: []fileState{broken("a"), good("b", x2)},
			lastGood: map[string]fileState{"a": good("a", x1)},
			want:     `a: malformed` + "\n" + `a: workload "x" is defined in a and b` + "\n" + `b: workload "x" is defined in a and b`},
		{name: "duplicate keeps the current owner", files: []fileState{good("a", x1), good("b", x2, y1)}, cur: map[string]applied[*spec.Workload]{"x": {"a", x1}},
			want: "put y b\n" + `a: workload "x" is defined in a and b` + "\n" + `b: workload "x" is defined in a and b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := makePlan(tc.files, tc.lastGood, tc.cur)
			var lines []string
			for _, d := range p.deletes {
				lines = append(lines, "delete "+d.name+" "+d.owner)
			}
			for _, a := range p.puts {
				lines = append(lines, "put "+a.w.Name+" "+a.owner)
			}
			var probs []string
			for file, errs := range p.problems {
				for _, err := range errs {
					probs = append(probs, fmt.Sprintf("%s: %v", file, err))
					if strings.Contains(err.Error(), "defined in") && !errors.Is(err, ErrDuplicateName) {
						t.Errorf("%v does not wrap ErrDuplicateName", err)
					}
				}
			}
			slices.Sort(probs)
			for i, p := range probs { // the wrapped sentinel is noise here
				probs[i] = strings.TrimSuffix(p, ": "+ErrDuplicateName.Error())
			}
			if got := strings.Join(append(lines, probs...), "\n"); got != tc.want {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
