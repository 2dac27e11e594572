package bench

import "time"

// Result is what one run measured.
type Result struct {
	Config
	// Durability says when the server answered a push or an ack, e.g.
	// "sync=always (fsync before every answer)".
	Durability string `json:"durability"`
	// Sweep names the parameter a series of runs varied ("batch",
	// "partitions"), Round the round of a comparison (from 1).
	Sweep string `json:"sweep,omitempty"`
	Round int    `json:"round,omitempty"`

	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`

	Filled    int64  `json:"filled"`    // messages pushed before the measured phase
	Pushed    int64  `json:"pushed"`    // messages pushed during it (answered stored)
	Delivered int64  `json:"delivered"` // messages popped during it (redeliveries included)
	Consumed  int64  `json:"consumed"`  // completed acks that took effect
	FailedOn  int64  `json:"failed_on_purpose"`
	Errors    int64  `json:"errors"`
	FirstErr  string `json:"first_error,omitempty"`

	// Msgs is the scenario's figure: pushed for push, consumed for the
	// others (over every group in fanout).
	Msgs       int64   `json:"msgs"`
	MsgsPerSec float64 `json:"msgs_per_s"`
	MBPerSec   float64 `json:"mb_per_s"` // payload bytes of Msgs, 10^6 bytes per second

	// Latency is the scenario's latency: per batch from intended send to
	// durable answer (push); per batch from intended pop to ack answered
	// (consume); per message from intended push to delivery (the others).
	Latency Latency `json:"latency"`
	// PushLatency is the per-batch push latency when consumers ran too.
	PushLatency *Latency `json:"push_latency,omitempty"`

	// Server is the server's resource use during the measured phase, when it
	// ran on this machine as a process of its own (backlog: the drain
	// phase's, as in Phases).
	Server *ServerUsage `json:"server,omitempty"`

	// Phases are the phases of a backlog run, measured each on its own:
	// "push" (the backlog pushed with no consumer) and "drain" (it consumed
	// whole, pop + ack, with no producer). The drain is the run's headline:
	// Msgs, MsgsPerSec, Elapsed, Latency and Server above are its figures,
	// Filled and PushLatency the push phase's.
	Phases []Phase `json:"phases,omitempty"`
}

// Phase is one phase of a backlog run.
type Phase struct {
	Name       string        `json:"name"` // "push" or "drain"
	Msgs       int64         `json:"msgs"` // pushed (answered stored), or completed acks
	Elapsed    time.Duration `json:"elapsed_ns"`
	MsgsPerSec float64       `json:"msgs_per_s"`
	MBPerSec   float64       `json:"mb_per_s"`
	// Latency per batch: push, send → durable answer; drain, pop → ack
	// answered.
	Latency Latency `json:"latency"`
	// Server: CPU over the phase, and PeakRSS the largest VmRSS sampled
	// during it (every RSSEvery), when the server runs here as a process.
	Server *ServerUsage `json:"server,omitempty"`
}

// PhaseNamed returns the phase of r named name, or nil.
func (r *Result) PhaseNamed(name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// ServerUsage is read from /proc.
type ServerUsage struct {
	CPUSeconds  float64 `json:"cpu_s"`          // user + system CPU time in the measured phase
	CPUPerMsgUs float64 `json:"cpu_per_msg_us"` // CPUSeconds per message of Msgs, in µs
	// PeakRSS is the process's peak resident set: VmHWM, or, when
	// RSSSamples > 0, the largest of that many VmRSS readings taken during
	// the phase.
	PeakRSS    int64 `json:"peak_rss_bytes"`
	RSSSamples int   `json:"rss_samples,omitempty"`
}
