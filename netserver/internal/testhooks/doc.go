// Package testhooks holds the switches that netserver's tests turn on in
// both doors at once. Being internal, only netserver and its doors can
// import it; nothing in a running broker sets them.
//
// The doors read the switches on their hot paths as one atomic load each;
// Race and Patience tell the doors' tests whether the race detector is on
// and how much longer to wait under it.
package testhooks
