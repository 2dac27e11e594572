package protocol

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestCodeTable(t *testing.T) {
	want := []struct {
		code Code
		name string
		http int
	}{
		{CodeOK, "ok", 200},
		{CodeInvalid, "invalid", 400},
		{CodeQueueNotFound, "queue_not_found", 404},
		{CodePartitionNotFound, "partition_not_found", 404},
		{CodeGroupNotFound, "group_not_found", 404},
		{CodeMessageNotFound, "message_not_found", 404},
		{CodeLeaseInvalid, "lease_invalid", 409},
		{CodeLeaseRequired, "lease_required", 400},
		{CodeNotInFlight, "not_in_flight", 409},
		{CodeAlreadyAcked, "already_acked", 409},
		{CodeTooLarge, "too_large", 413},
		{CodeQueueFull, "queue_full", 429},
		{CodeClosed, "closed", 503},
		{CodeJournal, "journal", 503},
		{CodeTxnAborted, "txn_aborted", 409},
		{CodeUnknownOp, "unknown_op", 400},
		{CodeFrameTooLarge, "frame_too_large", 413},
		{CodeMalformed, "malformed", 400},
		{CodeOverloaded, "overloaded", 429},
		{CodeVersionMismatch, "version_mismatch", 400},
		{CodeInternal, "internal", 500},
		{CodeEncryption, "encryption", 500},
		{CodeUnauthenticated, "unauthenticated", 401},
		{CodeForbidden, "forbidden", 403},
		{CodeDamaged, "damaged", 500},
		{CodeConflict, "conflict", 409},
		{CodeQueryNotFound, "query_not_found", 404},
		{CodeNotOwner, "not_owner", 421},
		{CodeUnavailable, "unavailable", 503},
		{CodeNotLeader, "not_leader", 421},
	}
	if len(Codes()) != len(want) {
		t.Fatalf("%d codes, the test knows %d", len(Codes()), len(want))
	}
	names := map[string]bool{}
	for i, w := range want {
		if w.code != Code(i) {
			t.Errorf("%s = %d, want %d (codes are stable and dense)", w.name, w.code, i)
		}
		if w.code.String() != w.name || w.code.HTTPStatus() != w.http {
			t.Errorf("code %d: %q %d, want %q %d", w.code, w.code.String(), w.code.HTTPStatus(), w.name, w.http)
		}
		if http.StatusText(w.http) == "" {
			t.Errorf("%s: %d is not an HTTP status", w.name, w.http)
		}
		if names[w.name] {
			t.Errorf("duplicate name %q", w.name)
		}
		names[w.name] = true
		if c, ok := ParseCode(w.name); !ok || c != w.code {
			t.Errorf("ParseCode(%q) = %v %v", w.name, c, ok)
		}
		if !w.code.Known() {
			t.Errorf("%s not known", w.name)
		}
	}
	unknown := Code(999)
	if unknown.Known() || unknown.String() != "code(999)" || unknown.HTTPStatus() != 500 {
		t.Errorf("unknown code: %v %q %d", unknown.Known(), unknown.String(), unknown.HTTPStatus())
	}
	if _, ok := ParseCode("nope"); ok {
		t.Error("ParseCode of an unknown name")
	}
}

func TestError(t *testing.T) {
	e := NewError(CodeQueueNotFound, `"orders"`)
	if e.Error() != `queue_not_found: "orders"` {
		t.Errorf("Error() = %q", e.Error())
	}
	if (&Error{Code: CodeClosed}).Error() != "closed" {
		t.Error("Error() without message")
	}
	wrapped := fmt.Errorf("pop: %w", e)
	if !errors.Is(wrapped, NewError(CodeQueueNotFound, "")) {
		t.Error("Is by code fails")
	}
	if errors.Is(wrapped, NewError(CodeGroupNotFound, "")) {
		t.Error("Is matches another code")
	}
	if CodeOf(wrapped) != CodeQueueNotFound || CodeOf(nil) != CodeOK || CodeOf(errors.New("x")) != CodeInternal {
		t.Error("CodeOf")
	}
	if !errors.Is(&Error{Code: CodeMalformed, Msg: "x"}, ErrMalformed) || errors.Is(ErrShort, ErrMalformed) {
		t.Error("sentinels")
	}
}

func TestCheckVersion(t *testing.T) {
	if err := CheckVersion(VersionMajor, VersionMinor+5); err != nil {
		t.Errorf("same major: %v", err)
	}
	err := CheckVersion(VersionMajor+1, 0)
	if !errors.Is(err, ErrVersionMismatch) {
		t.Errorf("other major: %v", err)
	}
}

func TestEnumNames(t *testing.T) {
	for _, c := range []struct {
		got, want string
		valid     bool
	}{
		{PushQueued.String(), "queued", PushQueued.Valid()},
		{PushDuplicate.String(), "duplicate", PushDuplicate.Valid()},
		{PushFailed.String(), "failed", PushFailed.Valid()},
		{PushStatus(0).String(), "unknown", !PushStatus(0).Valid()},
		{AckCompleted.String(), "completed", AckCompleted.Valid()},
		{AckFailed.String(), "failed", AckFailed.Valid()},
		{AckRetry.String(), "retry", AckRetry.Valid()},
		{AckDLQ.String(), "dlq", AckDLQ.Valid()},
		{AckStatus(5).String(), "unknown", !AckStatus(5).Valid()},
		{SubAll.String(), "all", SubAll.Valid()},
		{SubNew.String(), "new", SubNew.Valid()},
		{SubFrom.String(), "from", SubFrom.Valid()},
		{SubMode(3).String(), "unknown", !SubMode(3).Valid()},
		{OpPush.String(), "push", OpPush.Known()},
		{Op(0x7f).String(), "op(0x7f)", !Op(0x7f).Known()},
		{UUID{0: 0x01, 15: 0xff}.String(), "01000000-0000-0000-0000-0000000000ff", true},
	} {
		if c.got != c.want || !c.valid {
			t.Errorf("got %q (valid as expected: %v), want %q", c.got, c.valid, c.want)
		}
	}
}
