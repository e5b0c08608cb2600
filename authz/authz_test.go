package authz

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flyd-dev/flyd/errdefs"
)

var (
	root      = Caller{}
	peer      = Caller{UID: 1000, Confined: true}
	otherPeer = Caller{UID: 1001, Confined: true}
	forcing   = Caller{Force: true}
	file      = Caller{File: "web.yaml"}
	otherFile = Caller{File: "db.yaml"}

	newWorkload  = Doc{Name: "w"}
	rootsAPI     = Doc{Name: "w", Exists: true}
	peersAPI     = Doc{Name: "w", Exists: true, AppliedBy: 1000}
	filesOwn     = Doc{Name: "w", Exists: true, Owner: "web.yaml"}
	newNetwork   = Doc{Kind: "network", Name: "n"}
	apiNetwork   = Doc{Kind: "network", Name: "n", Exists: true}
	filesNetwork = Doc{Kind: "network", Name: "n", Exists: true, Owner: "web.yaml"}
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		c    Caller
		op   Op
		d    Doc
		kind error // nil: allowed
		msg  string
	}{
		// Workloads: root through the API.
		{root, Apply, newWorkload, nil, ""},
		{root, Apply, rootsAPI, nil, ""},
		{root, Apply, peersAPI, nil, ""},
		{root, Remove, peersAPI, nil, ""},
		{root, Act, filesOwn, nil, ""},
		{root, Read, filesOwn, nil, ""},
		{root, Apply, filesOwn, errdefs.ErrConflict, "conflict: workload w belongs to web.yaml in the workloads directory; change that file, or force"},
		{root, Remove, filesOwn, errdefs.ErrConflict, "conflict: workload w belongs to web.yaml in the workloads directory; change that file, or force"},
		{forcing, Apply, filesOwn, nil, ""},
		{forcing, Remove, filesOwn, nil, ""},
		// Workloads: a file of the workloads directory.
		{file, Apply, filesOwn, nil, ""},
		{file, Remove, filesOwn, nil, ""},
		{file, Apply, newWorkload, nil, ""},
		{otherFile, Apply, filesOwn, errdefs.ErrConflict, "conflict: workload w belongs to web.yaml in the workloads directory; change that file, or force"},
		{file, Apply, rootsAPI, errdefs.ErrConflict, "conflict: workload w was created through the API, not by web.yaml"},
		{file, Remove, rootsAPI, errdefs.ErrConflict, "conflict: workload w was created through the API, not by web.yaml"},
		{file, Act, rootsAPI, nil, ""},
		// Workloads: a confined peer.
		{peer, Apply, newWorkload, nil, ""},
		{peer, Apply, peersAPI, nil, ""},
		{peer, Remove, peersAPI, nil, ""},
		{peer, Act, peersAPI, nil, ""},
		{peer, Read, peersAPI, nil, ""},
		{otherPeer, Read, peersAPI, errdefs.ErrForbidden, "forbidden: workload w was applied by uid 1000: a caller other than root acts only on the workloads it applied"},
		{otherPeer, Act, peersAPI, errdefs.ErrForbidden, "forbidden: workload w was applied by uid 1000: a caller other than root acts only on the workloads it applied"},
		{otherPeer, Apply, peersAPI, errdefs.ErrForbidden, "forbidden: workload w was applied by uid 1000: a caller other than root acts only on the workloads it applied"},
		{otherPeer, Remove, peersAPI, errdefs.ErrForbidden, "forbidden: workload w was applied by uid 1000: a caller other than root acts only on the workloads it applied"},
		{peer, Act, rootsAPI, errdefs.ErrForbidden, "forbidden: workload w was applied by uid 0: a caller other than root acts only on the workloads it applied"},
		// The file's ownership is judged before the lane.
		{peer, Apply, filesOwn, errdefs.ErrConflict, "conflict: workload w belongs to web.yaml in the workloads directory; change that file, or force"},
		{Caller{UID: 1000, Confined: true, Force: true}, Remove, filesOwn, errdefs.ErrForbidden, "forbidden: workload w was applied by uid 0: a caller other than root acts only on the workloads it applied"},
		// Other documents.
		{root, Apply, newNetwork, nil, ""},
		{root, Apply, apiNetwork, nil, ""},
		{root, Remove, apiNetwork, nil, ""},
		{root, Apply, filesNetwork, errdefs.ErrConflict, "conflict: network n belongs to web.yaml in the workloads directory; change that file"},
		{forcing, Remove, filesNetwork, errdefs.ErrConflict, "conflict: network n belongs to web.yaml in the workloads directory; change that file"},
		{file, Apply, filesNetwork, nil, ""},
		{file, Remove, filesNetwork, nil, ""},
		{file, Apply, newNetwork, nil, ""},
		{otherFile, Remove, filesNetwork, errdefs.ErrConflict, "conflict: network n belongs to web.yaml in the workloads directory; change that file"},
		{file, Apply, apiNetwork, errdefs.ErrConflict, "conflict: network n was made through the API, not by web.yaml"},
		{peer, Apply, newNetwork, errdefs.ErrForbidden, "kind: network n: network documents are root's while --peer-users limits callers"},
		{peer, Remove, apiNetwork, errdefs.ErrForbidden, "kind: network n: network documents are root's while --peer-users limits callers"},
		{peer, Apply, Doc{Kind: "policy", Name: "p"}, errdefs.ErrForbidden, "kind: policy p: policy documents are root's while --peer-users limits callers"},
		{peer, Apply, Doc{Kind: "workspace", Name: "w"}, errdefs.ErrForbidden, "kind: workspace w: workspace documents are root's while --peer-users limits callers"},
		{peer, Read, apiNetwork, nil, ""},
		{otherFile, Read, filesNetwork, nil, ""},
	} {
		t.Run(fmt.Sprintf("%+v/%d/%+v", tc.c, tc.op, tc.d), func(t *testing.T) {
			err := Decide(tc.c, tc.op, tc.d)
			switch {
			case tc.kind == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.kind == nil:
			case !errors.Is(err, tc.kind):
				t.Fatalf("err = %v, want %v", err, tc.kind)
			case err.Error() != tc.msg:
				t.Fatalf("err = %q, want %q", err, tc.msg)
			}
		})
	}
}

// TestDecideEverywhere runs every caller, operation and document against
// what holds whatever the rest: a look is never a conflict, nor refused
// to a caller that is not confined; a new workload is anyone's; a caller
// on its own document is never refused; every refusal is one of the two
// kinds.
func TestDecideEverywhere(t *testing.T) {
	callers := []Caller{root, peer, otherPeer, forcing, file, otherFile, {UID: 1000, Confined: true, Force: true}, {File: "web.yaml", Force: true}}
	docs := []Doc{newWorkload, rootsAPI, peersAPI, filesOwn, {Name: "w", Exists: true, AppliedBy: 1000, Owner: "web.yaml"},
		newNetwork, apiNetwork, filesNetwork, {Kind: "policy", Name: "p", Exists: true, Owner: "db.yaml"}}
	for _, c := range callers {
		for _, op := range []Op{Read, Act, Apply, Remove} {
			for _, d := range docs {
				err := Decide(c, op, d)
				name := fmt.Sprintf("%+v %d %+v: %v", c, op, d, err)
				mine := d.Owner == c.File && (!c.Confined || d.AppliedBy == c.UID)
				switch {
				case err != nil && !errors.Is(err, errdefs.ErrForbidden) && !errors.Is(err, errdefs.ErrConflict):
					t.Errorf("%s: neither forbidden nor a conflict", name)
				case (op == Read || op == Act) && errors.Is(err, errdefs.ErrConflict):
					t.Errorf("%s: a look or a command is a conflict", name)
				case (op == Read || op == Act) && !c.Confined && err != nil:
					t.Errorf("%s: refused to a caller not confined", name)
				case d.Kind == "" && !d.Exists && err != nil:
					t.Errorf("%s: a new workload refused", name)
				case d.Kind == "" && mine && err != nil:
					t.Errorf("%s: refused its own workload", name)
				case d.Kind != "" && !c.Confined && d.Owner == c.File && err != nil:
					t.Errorf("%s: refused its own document", name)
				}
			}
		}
	}
}
