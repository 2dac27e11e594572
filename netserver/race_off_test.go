//go:build !race

package netserver_test

const raceEnabled = false
