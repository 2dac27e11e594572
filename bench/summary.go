package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// SideSummary is one side of a comparison over its rounds: medians, and
// the ratio of the reference side (the first) to it, per round.
type SideSummary struct {
	Side       string    `json:"side"`
	Target     string    `json:"target"`
	Durability string    `json:"durability"`
	Rounds     int       `json:"rounds"`
	MsgsPerSec float64   `json:"msgs_per_s"`
	MBPerSec   float64   `json:"mb_per_s"`
	P50        float64   `json:"p50_ns"`
	P99        float64   `json:"p99_ns"`
	P999       float64   `json:"p999_ns"`
	CPUPerMsg  float64   `json:"cpu_per_msg_us"` // 0 when not measured
	PeakRSS    int64     `json:"peak_rss_bytes"` // the largest of the rounds; 0 when not measured
	PerRound   []float64 `json:"per_round_msgs_per_s"`
	Ratios     []float64 `json:"ratios,omitempty"` // reference ÷ this side, per round
	Ratio      float64   `json:"ratio,omitempty"`  // their median
	Errors     int64     `json:"errors"`
	// Phases of backlog runs (push, drain), over the rounds.
	Phases []PhaseSummary `json:"phases,omitempty"`
}

// PhaseSummary is one phase of a side's backlog runs over its rounds.
type PhaseSummary struct {
	Name       string  `json:"name"`
	Msgs       int64   `json:"msgs"`           // median
	MsgsPerSec float64 `json:"msgs_per_s"`     // median
	P99        float64 `json:"p99_ns"`         // median, per batch
	CPUPerMsg  float64 `json:"cpu_per_msg_us"` // median; 0 when not measured
	PeakRSS    int64   `json:"peak_rss_bytes"` // the largest of the rounds' sampled peaks; 0 when not measured
}

// summarizePhases: per phase name, in the order of the first result.
func summarizePhases(rs []*Result) []PhaseSummary {
	if len(rs) == 0 || len(rs[0].Phases) == 0 {
		return nil
	}
	var out []PhaseSummary
	for _, ph := range rs[0].Phases {
		s := PhaseSummary{Name: ph.Name}
		var msgs, mps, p99, cpu []float64
		for _, r := range rs {
			p := r.PhaseNamed(ph.Name)
			if p == nil {
				continue
			}
			msgs, mps, p99 = append(msgs, float64(p.Msgs)), append(mps, p.MsgsPerSec), append(p99, float64(p.Latency.P99))
			if p.Server != nil {
				cpu = append(cpu, p.Server.CPUPerMsgUs)
				s.PeakRSS = max(s.PeakRSS, p.Server.PeakRSS)
			}
		}
		s.Msgs, s.MsgsPerSec, s.P99, s.CPUPerMsg = int64(median(msgs)), median(mps), median(p99), median(cpu)
		out = append(out, s)
	}
	return out
}

// sideOf names a result's side: its target and, where several sync
// settings of one target meet, its durability.
func sideOf(r *Result) string {
	d := Side{Target: r.Target, PeerSyncAlways: r.Target == TargetNATS && strings.Contains(r.Durability, "always")}
	if r.Target == TargetRedis {
		for _, f := range RedisFsyncs {
			if strings.HasPrefix(r.Durability, "appendfsync "+f) {
				d.RedisFsync = f
			}
		}
	}
	return d.String()
}

// Summarize groups results by side, in the order sides first appear; the
// first side is the reference of the ratios. Rounds pair results with the
// same Round (a run without a round is round 0).
func Summarize(results []Result) []SideSummary {
	var order []string
	by := map[string][]*Result{}
	for i := range results {
		r := &results[i]
		k := sideOf(r)
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	refRound := map[int]float64{}
	var out []SideSummary
	for n, k := range order {
		rs := by[k]
		s := SideSummary{Side: k, Target: rs[0].Target, Durability: rs[0].Durability, Rounds: len(rs)}
		var mb, p50, p99, p999, cpu []float64
		for _, r := range rs {
			s.PerRound = append(s.PerRound, r.MsgsPerSec)
			mb = append(mb, r.MBPerSec)
			p50 = append(p50, float64(r.Latency.P50))
			p99 = append(p99, float64(r.Latency.P99))
			p999 = append(p999, float64(r.Latency.P999))
			if r.Server != nil {
				cpu = append(cpu, r.Server.CPUPerMsgUs)
				s.PeakRSS = max(s.PeakRSS, r.Server.PeakRSS)
			}
			s.Errors += r.Errors
			if n == 0 {
				refRound[r.Round] = r.MsgsPerSec
			} else if ref, ok := refRound[r.Round]; ok && r.MsgsPerSec > 0 {
				s.Ratios = append(s.Ratios, ref/r.MsgsPerSec)
			}
		}
		s.MsgsPerSec, s.MBPerSec = median(s.PerRound), median(mb)
		s.P50, s.P99, s.P999, s.CPUPerMsg = median(p50), median(p99), median(p999), median(cpu)
		s.Ratio = median(s.Ratios)
		s.Phases = summarizePhases(rs)
		out = append(out, s)
	}
	return out
}

// WriteResult prints one run for people.
func WriteResult(w io.Writer, r *Result) {
	fmt.Fprintf(w, "%s on %s (%s)", r.Scenario, r.Target, r.Durability)
	if r.Round > 0 {
		fmt.Fprintf(w, ", round %d", r.Round)
	}
	fmt.Fprintf(w, "\n  %s\n", describeLoad(&r.Config))
	if len(r.Phases) > 0 {
		writePhases(w, r)
		return
	}
	fmt.Fprintf(w, "  %s msgs/s  %.1f MB/s  in %.1fs  latency p50 %s  p99 %s  p999 %s  max %s\n",
		count(int64(r.MsgsPerSec)), r.MBPerSec, r.Elapsed.Seconds(), dur(float64(r.Latency.P50)), dur(float64(r.Latency.P99)),
		dur(float64(r.Latency.P999)), dur(float64(r.Latency.Max)))
	fmt.Fprintf(w, "  pushed %s  delivered %s  completed %s", count(r.Pushed), count(r.Delivered), count(r.Consumed))
	if r.Filled > 0 {
		fmt.Fprintf(w, "  (pre-filled %s)", count(r.Filled))
	}
	if r.FailedOn > 0 {
		fmt.Fprintf(w, "  failed on purpose %s", count(r.FailedOn))
	}
	fmt.Fprintln(w)
	if r.PushLatency != nil {
		fmt.Fprintf(w, "  push latency p50 %s  p99 %s  p999 %s\n", dur(float64(r.PushLatency.P50)), dur(float64(r.PushLatency.P99)), dur(float64(r.PushLatency.P999)))
	}
	if r.Server != nil {
		fmt.Fprintf(w, "  server: %.2f s CPU (%.2f µs/msg), peak RSS %s\n", r.Server.CPUSeconds, r.Server.CPUPerMsgUs, mib(r.Server.PeakRSS))
	}
	if r.Errors > 0 {
		fmt.Fprintf(w, "  %d errors; first: %s\n", r.Errors, r.FirstErr)
	}
}

// writePhases prints a backlog run: a line per phase, then the counts.
func writePhases(w io.Writer, r *Result) {
	for _, ph := range r.Phases {
		fmt.Fprintf(w, "  %-5s  %s msgs in %.1fs: %s msgs/s  %.1f MB/s  batch latency p50 %s  p99 %s  p999 %s\n", ph.Name,
			count(ph.Msgs), ph.Elapsed.Seconds(), count(int64(ph.MsgsPerSec)), ph.MBPerSec,
			dur(float64(ph.Latency.P50)), dur(float64(ph.Latency.P99)), dur(float64(ph.Latency.P999)))
		if u := ph.Server; u != nil {
			fmt.Fprintf(w, "         server: %.2f s CPU (%.2f µs/msg), peak RSS %s (largest of %d readings)\n",
				u.CPUSeconds, u.CPUPerMsgUs, mib(u.PeakRSS), u.RSSSamples)
		}
	}
	fmt.Fprintf(w, "  pushed %s  delivered %s  completed %s", count(r.Pushed), count(r.Delivered), count(r.Consumed))
	if want := r.Pushed * int64(r.Groups); r.Consumed != want {
		fmt.Fprintf(w, "  (%s short of %s: the drain was cut by --duration or by errors)", count(want-r.Consumed), count(want))
	}
	fmt.Fprintln(w)
	if r.Errors > 0 {
		fmt.Fprintf(w, "  %d errors; first: %s\n", r.Errors, r.FirstErr)
	}
}

// describeLoad is the one-line load of a config.
func describeLoad(c *Config) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%d B, batch %d", c.MsgSize, c.Batch))
	if c.pushes() {
		parts = append(parts, fmt.Sprintf("%d producers × %d in flight", c.Producers, c.InFlight))
	}
	if c.consumes() {
		g := fmt.Sprintf("%d consumers", c.Consumers)
		if c.Groups > 1 {
			g = fmt.Sprintf("%d groups × %d consumers", c.Groups, c.Consumers)
		}
		parts = append(parts, g)
	}
	p := fmt.Sprintf("%s partitions", count(int64(c.Partitions)))
	if c.IdlePartitions > 0 {
		p += fmt.Sprintf(" + %s idle", count(int64(c.IdlePartitions)))
	}
	parts = append(parts, p)
	if c.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %s msgs/s", count(int64(c.Rate))))
	}
	if c.FailFraction > 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% failed", 100*c.FailFraction))
	}
	if c.backlog() {
		parts = append(parts, fmt.Sprintf("backlog of %s messages (drain ≤ %s)", count(c.Messages), c.Duration))
		if c.DropCaches {
			parts = append(parts, "page cache dropped before the drain")
		}
	} else if c.Messages > 0 {
		parts = append(parts, fmt.Sprintf("%s messages (≤ %s)", count(c.Messages), c.Duration))
	} else {
		parts = append(parts, c.Duration.String())
	}
	return strings.Join(parts, ", ")
}

// WriteSummary prints a comparison's medians and ratios.
func WriteSummary(w io.Writer, sums []SideSummary) {
	fmt.Fprintf(w, "\n%-28s %6s %12s %8s %9s %9s %9s %10s %9s  %s\n", "side", "rounds", "msgs/s", "MB/s", "p50", "p99", "p999", "cpu µs/msg", "peak RSS", "ratio (per round)")
	for i, s := range sums {
		ratio := "reference"
		if i > 0 {
			ratio = fmt.Sprintf("%.1f× (%s)", s.Ratio, ratiosText(s.Ratios))
		}
		cpu, rss := "-", "-"
		if s.PeakRSS > 0 {
			cpu, rss = fmt.Sprintf("%.2f", s.CPUPerMsg), mib(s.PeakRSS)
		}
		fmt.Fprintf(w, "%-28s %6d %12s %8.1f %9s %9s %9s %10s %9s  %s\n", s.Side, s.Rounds, count(int64(s.MsgsPerSec)), s.MBPerSec,
			dur(s.P50), dur(s.P99), dur(s.P999), cpu, rss, ratio)
	}
	if len(sums) > 0 && len(sums[0].Phases) > 0 {
		fmt.Fprintf(w, "\n%-28s %12s %10s %9s %12s %10s %9s\n", "backlog phases", "push msgs/s", "cpu µs/msg", "push RSS",
			"drain msgs/s", "cpu µs/msg", "drain RSS")
		for _, s := range sums {
			push, drain := phaseOf(s.Phases, "push"), phaseOf(s.Phases, "drain")
			fmt.Fprintf(w, "%-28s %12s %10s %9s %12s %10s %9s\n", s.Side, count(int64(push.MsgsPerSec)), cpuText(push, "-"),
				mib(push.PeakRSS), count(int64(drain.MsgsPerSec)), cpuText(drain, "-"), mib(drain.PeakRSS))
		}
	}
	for _, s := range sums {
		fmt.Fprintf(w, "  %s: %s\n", s.Side, s.Durability)
	}
}

// phaseOf returns the phase named name (a zero one when absent).
func phaseOf(ps []PhaseSummary, name string) PhaseSummary {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	return PhaseSummary{Name: name}
}

// cpuText is a phase's CPU per message, or none when not measured.
func cpuText(p PhaseSummary, none string) string {
	if p.CPUPerMsg == 0 {
		return none
	}
	return fmt.Sprintf("%.2f", p.CPUPerMsg)
}

// ratiosText is a side's per-round ratios: "4.6, 4.9, 4.3".
func ratiosText(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.1f", r)
	}
	return strings.Join(parts, ", ")
}

// dur formats nanoseconds compactly: 850µs, 12.3ms, 1.20s.
func dur(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", ns/1e3)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", ns/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0fms", ns/1e6)
	}
	return fmt.Sprintf("%.2fs", ns/1e9)
}

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}
