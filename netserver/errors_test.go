package netserver

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/protocol"
)

// TestEveryEngineErrorHasACode reads the engine's source for every exported
// error variable (Err...) and checks that the error table gives each a code
// of its own: an engine error without a row answers "internal" (HTTP 500),
// which tells a client nothing. A new engine error fails this test until it
// is added to engineErrors below and to errorCodes.
func TestEveryEngineErrorHasACode(t *testing.T) {
	engineErrors := map[string]error{
		"ErrInvalid": engine.ErrInvalid, "ErrQueueNotFound": engine.ErrQueueNotFound,
		"ErrPartitionNotFound": engine.ErrPartitionNotFound, "ErrGroupNotFound": engine.ErrGroupNotFound,
		"ErrMessageNotFound": engine.ErrMessageNotFound, "ErrLeaseInvalid": engine.ErrLeaseInvalid,
		"ErrLeaseRequired": engine.ErrLeaseRequired, "ErrNotInFlight": engine.ErrNotInFlight,
		"ErrAlreadyAcked": engine.ErrAlreadyAcked, "ErrTooLarge": engine.ErrTooLarge,
		"ErrQueueFull": engine.ErrQueueFull, "ErrClosed": engine.ErrClosed, "ErrDeposed": engine.ErrDeposed, "ErrJournal": engine.ErrJournal,
		"ErrOverloaded": engine.ErrOverloaded, "ErrTxnAborted": engine.ErrTxnAborted,
		"ErrEncryption": engine.ErrEncryption, "ErrBadUUID": engine.ErrBadUUID,
		"ErrUnreadable": engine.ErrUnreadable, "ErrConflict": engine.ErrConflict, "ErrQueryNotFound": engine.ErrQueryNotFound,
	}
	files, err := filepath.Glob("../engine/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("engine sources: %v %v", files, err)
	}
	var declared []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, sp := range gd.Specs {
				for _, n := range sp.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						declared = append(declared, n.Name)
					}
				}
			}
		}
	}
	sort.Strings(declared)
	if len(declared) < 10 {
		t.Fatalf("found only %v in the engine's sources", declared)
	}
	used := map[protocol.Code]string{}
	for _, name := range declared {
		e, ok := engineErrors[name]
		if !ok {
			t.Errorf("engine.%s is not known to this test: add it here and give it a row in errorCodes", name)
			continue
		}
		wrapped := fmt.Errorf("context: %w", e)
		code := CodeOf(wrapped)
		if code == protocol.CodeInternal {
			t.Errorf("engine.%s answers %s (HTTP %d): it has no row in errorCodes", name, code, HTTPStatus(wrapped))
		}
		if other, dup := used[code]; dup && code != protocol.CodeInvalid {
			t.Errorf("engine.%s and engine.%s share code %s", name, other, code)
		}
		used[code] = name
	}
}

// The text sent beside a code leaves out the code's name that a wrapped
// protocol error puts in front: the client puts it back once, and read
// "not_leader: not_leader: ..." before.
func TestMessageOfLeavesTheCodeToTheReceiver(t *testing.T) {
	notLeader := protocol.NewError(protocol.CodeNotLeader, "this broker does not lead the shard")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{notLeader, "this broker does not lead the shard"},
		{fmt.Errorf("%w: shard 3: leader 2 in term 5", notLeader), "this broker does not lead the shard: shard 3: leader 2 in term 5"},
		{fmt.Errorf("push: %w", notLeader), "push: not_leader: this broker does not lead the shard"},
		{errors.New("something else"), "something else"},
	} {
		msg := MessageOf(tc.err)
		if msg != tc.want {
			t.Errorf("MessageOf(%q) = %q, want %q", tc.err, msg, tc.want)
		}
		// What the client makes of code and text is what the server had.
		if back := protocol.NewError(CodeOf(tc.err), msg).Error(); errors.Is(tc.err, notLeader) && !strings.HasPrefix(tc.want, "push") && back != tc.err.Error() {
			t.Errorf("the client reads %q, the server said %q", back, tc.err)
		}
	}
}
