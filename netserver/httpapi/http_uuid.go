package httpapi

import "github.com/regentmq/regent/engine"

// Every acknowledgment names a partitionId and a leaseId, and a batch's
// mostly repeat theirs: repeated texts are read once.

// uuidMemo remembers the last UUID text a call read and its UUID: the
// acknowledgments of a batch mostly repeat their partitionId and leaseId.
type uuidMemo struct {
	text []byte // aliases the request body: reset with the call
	id   engine.UUID
}

// parse is engine.ParseUUID(b), once per distinct text in a row.
func (m *uuidMemo) parse(b []byte) (engine.UUID, error) {
	if len(b) == 36 && string(b) == string(m.text) {
		return m.id, nil
	}
	u, err := engine.ParseUUID(unsafeString(b))
	if err == nil {
		m.text, m.id = b, u
	}
	return u, err
}
