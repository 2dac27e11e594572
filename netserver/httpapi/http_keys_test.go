package httpapi_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/regentmq/regent/engine"
)

// TestHTTPMessagesListsUnreadable: GET /api/v1/messages lists a message
// whose payload no key opens (here its key was declared lost) with a
// payloadError saying why, beside the messages that open. It used to list
// nothing at all, without an error.
func TestHTTPMessagesListsUnreadable(t *testing.T) {
	dir := t.TempDir()
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	h := harnessOn(t, dir, engine.Config{EncryptionKey: k1})
	o := engine.DefaultQueueOptions()
	o.EncryptionEnabled = true
	if _, err := h.e.Configure(context.Background(), "sq", o); err != nil {
		t.Fatal(err)
	}
	h.push(obj{"queue": "sq", "partition": "p", "payload": "old"})
	h.close()
	h = harnessOn(t, dir, engine.Config{EncryptionKey: k2, EncryptionLostKeys: []string{engine.KeyFingerprint(k1)}})
	h.push(obj{"queue": "sq", "partition": "p", "payload": "new"})
	var list struct {
		Messages []obj `json:"messages"`
	}
	h.call("GET", "/api/v1/messages?queue=sq", nil, 200, &list)
	if len(list.Messages) != 2 {
		t.Fatalf("listed %d messages, want 2: %v", len(list.Messages), list.Messages)
	}
	why, _ := list.Messages[0]["payloadError"].(string)
	if !strings.Contains(why, engine.KeyFingerprint(k1)) || list.Messages[1]["payloadError"] != nil {
		t.Fatalf("payloadError: %q and %v", why, list.Messages[1]["payloadError"])
	}
	var st struct {
		Messages []obj `json:"messages"`
	}
	h.call("GET", "/api/v1/status/queues/sq/messages", nil, 200, &st)
	if len(st.Messages) != 2 || st.Messages[0]["payloadError"] == nil {
		t.Fatalf("status messages: %v", st.Messages)
	}
}
