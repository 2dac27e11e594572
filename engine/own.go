package engine

import "strings"

// own returns s in memory of the engine's own. Every string the engine keeps
// beyond the call that brought it goes through own (or is copied into a
// journal record the engine keeps), at the one place where it becomes kept
// state: a caller's strings may alias a buffer that the caller's next
// request overwrites (the binary protocol decodes into pooled arenas). See
// "Ownership" in doc.go.
func own(s string) string { return strings.Clone(s) }

// setOptions stores a copy of o whose strings are the engine's own.
func (q *queue) setOptions(o *QueueOptions) {
	oc := *o
	oc.Namespace, oc.Task = own(o.Namespace), own(o.Task)
	q.opts.Store(&oc)
}
