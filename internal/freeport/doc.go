// Package freeport finds loopback ports for tests and harnesses that must
// know a broker's ports before it starts (a cluster's peers name each
// other; a broker killed and restarted takes its ports back).
//
// A port is drawn at random below the kernel's ephemeral range, where the
// ports given to listeners on port 0 and to outgoing connections come
// from: such a socket elsewhere cannot take it between the draw and its
// use, nor while a killed broker is down. Only another draw can, which is
// rare (a few ports out of some twenty thousand).
package freeport
