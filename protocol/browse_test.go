package protocol

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestBrowseMalformed: broken Browse bodies are refused as malformed, with
// a message that names the body and what is wrong.
func TestBrowseMalformed(t *testing.T) {
	req := bodyOf(&BrowseRequest{Queue: "q", N: 1})
	reply := bodyOf(&BrowseReply{Queue: "q", More: true})
	moreAt := len(reply) - 1 - 16 - 1 // the more flag
	badBool := append([]byte(nil), reply...)
	badBool[moreAt] = 2
	for _, c := range []struct {
		name string
		v    Body
		body []byte
		want string
	}{
		{"empty request", &BrowseRequest{}, nil, "browse request: truncated"},
		{"request without resume", &BrowseRequest{}, req[:len(req)-17], "browse request: truncated"},
		{"request with a byte more", &BrowseRequest{}, append(append([]byte(nil), req...), 0), "browse request: trailing bytes"},
		{"limit above 32 bits", &BrowseRequest{}, append(append([]byte{1, 'q', 0, 0, 1}, appendUv(nil, math.MaxUint32+1)...), make([]byte, 19)...),
			"browse request: value above 32 bits"},
		{"more neither 0 nor 1", &BrowseReply{}, badBool, "browse reply: bool is neither 0 nor 1"},
		{"forged message count", &BrowseReply{}, append([]byte{1, 'q', 0xff, 0xff, 0x03}, reply[3:]...), "browse reply: count beyond body"},
		{"forged gap count", &BrowseReply{}, append([]byte{1, 'q', 0, 100}, reply[4:]...), "browse reply: count beyond body"},
	} {
		err := c.v.Decode(c.body)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want malformed %q", c.name, err, c.want)
		}
	}
	if !BrowseFrom.Valid() || !BrowseLast.Valid() || BrowseStart(2).Valid() {
		t.Error("BrowseStart.Valid")
	}
}

// TestBrowseSizes: a message's and a gap's fixed fields, and a reply's own,
// at their widest, take no more than the constants a server fills a reply
// with.
func TestBrowseSizes(t *testing.T) {
	m := BrowseMessage{ID: UUID{1}, CreatedAt: math.MinInt64, PartitionID: UUID{1}, Offset: math.MaxUint64, Size: math.MaxUint32}
	one := len(bodyOf(&BrowseReply{Messages: []BrowseMessage{m}})) - len(bodyOf(&BrowseReply{}))
	// The length prefixes of 4 empty strings and an empty payload take a
	// byte each; long ones take up to 5, which the constant counts.
	if one-5+5*5 > MaxBrowseMessageFixed {
		t.Errorf("a message's fixed fields take %d bytes, MaxBrowseMessageFixed is %d", one, MaxBrowseMessageFixed)
	}
	g := BrowseGap{Before: math.MaxUint32, PartitionID: UUID{1}, First: math.MaxUint64, Last: math.MaxUint64, Reason: GapDeleted}
	if n := len(bodyOf(&BrowseReply{Gaps: []BrowseGap{g}})) - len(bodyOf(&BrowseReply{})) - 1 + 5; n > MaxBrowseGapFixed {
		t.Errorf("a gap's fixed fields take %d bytes, MaxBrowseGapFixed is %d", n, MaxBrowseGapFixed)
	}
	// The reply's own fields, its two counts at 5 bytes.
	name := strings.Repeat("q", 300)
	empty := &BrowseReply{Queue: name, More: true, NextPartition: UUID{1}, NextOffset: math.MaxUint64}
	if n := len(AppendFrame(nil, 1, empty)) + 2*4; n > BrowseReplyFixed(len(name)) {
		t.Errorf("a reply's own fields take %d bytes, BrowseReplyFixed says %d", n, BrowseReplyFixed(len(name)))
	}
}
