package main

import (
	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver/httpapi"
)

// Names the broker keeps for itself are not the operator's: the group of
// pops without a group (queue mode) is shown as queueModeLabel, and
// Regent's own queues (the traces the HTTP door stores) are left out of
// the listings (queues, groups). A queue named on the command line is
// shown whatever its name.

// queueModeLabel stands for the queue-mode group wherever a group is shown.
const queueModeLabel = "(queue mode)"

// groupLabel is how a group's name is shown.
func groupLabel(name string) string {
	if name == engine.QueueModeGroup {
		return queueModeLabel
	}
	return name
}

// groupPhrase names a group in a sentence: "group billing", or "queue mode".
func groupPhrase(name string) string {
	if name == engine.QueueModeGroup || name == "" {
		return "queue mode"
	}
	return "group " + name
}

// groupLabels is groupLabel of each name.
func groupLabels(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = groupLabel(n)
	}
	return out
}

// internalQueue reports whether a queue is Regent's own, left out of
// listings.
func internalQueue(name string) bool { return httpapi.InternalQueue(name) }
