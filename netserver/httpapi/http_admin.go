package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/regentmq/regent/engine"
	"github.com/regentmq/regent/netserver"
)

// Queue configuration and deletion: POST /api/v1/configure and
// DELETE /api/v1/resources/queues/{queue}.

// writeValue answers with v encoded by encoding/json (the cold routes).
func (s *Server) writeValue(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.writeErr(w, fmt.Errorf("encoding the answer: %w", err))
		return
	}
	writeJSON(w, status, b)
}

// decodeBody reads a JSON object body into v (the cold routes). On failure
// it has answered 400 (or 413) and returns false.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	body, ok := s.readBody(w, r, allowEmpty)
	if !ok {
		return false
	}
	defer s.putBody(body)
	if len(*body) == 0 {
		return true
	}
	if err := json.Unmarshal(*body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be %s", te.Field, jsonKind(te.Type.Kind().String())))
			return false
		}
		writeError(w, http.StatusBadRequest, "Invalid JSON: "+err.Error())
		return false
	}
	return true
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "a number"
}

// queueOptionsJSON is Queen's 15 queue options, in the order Queen echoes
// them. Durations are in Queen's units: seconds, retryDelay milliseconds.
type queueOptionsJSON struct {
	Priority                  int     `json:"priority"`
	LeaseTime                 float64 `json:"leaseTime"`
	RetryLimit                int     `json:"retryLimit"`
	RetryDelay                float64 `json:"retryDelay"`
	MaxSize                   int64   `json:"maxSize"`
	TTL                       float64 `json:"ttl"`
	DeadLetterQueue           bool    `json:"deadLetterQueue"`
	DLQAfterMaxRetries        bool    `json:"dlqAfterMaxRetries"`
	DelayedProcessing         float64 `json:"delayedProcessing"`
	WindowBuffer              float64 `json:"windowBuffer"`
	RetentionSeconds          int64   `json:"retentionSeconds"`
	CompletedRetentionSeconds int64   `json:"completedRetentionSeconds"`
	RetentionEnabled          bool    `json:"retentionEnabled"`
	EncryptionEnabled         bool    `json:"encryptionEnabled"`
	MaxWaitTimeSeconds        int64   `json:"maxWaitTimeSeconds"`
}

func optionsJSON(o *engine.QueueOptions) queueOptionsJSON {
	return queueOptionsJSON{
		Priority:                  o.Priority,
		LeaseTime:                 o.LeaseTime.Seconds(),
		RetryLimit:                o.RetryLimit,
		RetryDelay:                float64(o.RetryDelay) / float64(time.Millisecond),
		MaxSize:                   o.MaxSize,
		TTL:                       o.TTL.Seconds(),
		DeadLetterQueue:           o.DeadLetterQueue,
		DLQAfterMaxRetries:        o.DLQAfterMaxRetries,
		DelayedProcessing:         o.DelayedProcessing.Seconds(),
		WindowBuffer:              o.WindowBuffer.Seconds(),
		RetentionSeconds:          o.RetentionSeconds,
		CompletedRetentionSeconds: o.CompletedRetentionSeconds,
		RetentionEnabled:          o.RetentionEnabled,
		EncryptionEnabled:         o.EncryptionEnabled,
		MaxWaitTimeSeconds:        o.MaxWaitTimeSeconds,
	}
}

// queenLeaseFallback is the lease Queen uses for a queue configured with
// leaseTime 0.
const queenLeaseFallback = 60 * time.Second

// parseQueueOptions applies Queen's option keys to the defaults (configure
// replaces every option: one left out goes back to its default). Unknown
// keys are ignored, as Queen does; maxPartitions is Regent's own.
func parseQueueOptions(m map[string]any) (engine.QueueOptions, error) {
	o := engine.DefaultQueueOptions()
	num := func(k string) (float64, bool, error) {
		v, ok := m[k]
		if !ok || v == nil {
			return 0, false, nil
		}
		switch x := v.(type) {
		case float64:
			return x, true, nil
		case string:
			f, err := strconv.ParseFloat(x, 64)
			if err == nil {
				return f, true, nil
			}
		case bool:
			if x {
				return 1, true, nil
			}
			return 0, true, nil
		}
		return 0, false, badRequest("options." + k + " must be a number")
	}
	flag := func(k string, dst *bool) error {
		v, ok := m[k]
		if !ok || v == nil {
			return nil
		}
		switch x := v.(type) {
		case bool:
			*dst = x
		case float64:
			*dst = x != 0
		case string:
			*dst = x == "true" || x == "1"
		default:
			return badRequest("options." + k + " must be a boolean")
		}
		return nil
	}
	secs := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	type numOpt struct {
		key string
		set func(float64)
	}
	for _, n := range []numOpt{
		{"leaseTime", func(f float64) {
			o.LeaseTime = secs(f)
			if f == 0 {
				o.LeaseTime = queenLeaseFallback
			}
		}},
		{"retryLimit", func(f float64) { o.RetryLimit = int(f) }},
		{"retryDelay", func(f float64) { o.RetryDelay = time.Duration(f * float64(time.Millisecond)) }},
		{"delayedProcessing", func(f float64) { o.DelayedProcessing = secs(f) }},
		{"windowBuffer", func(f float64) { o.WindowBuffer = secs(f) }},
		{"maxSize", func(f float64) { o.MaxSize = int64(f) }},
		{"ttl", func(f float64) { o.TTL = secs(f) }},
		{"retentionSeconds", func(f float64) { o.RetentionSeconds = int64(f) }},
		{"completedRetentionSeconds", func(f float64) { o.CompletedRetentionSeconds = int64(f) }},
		{"maxWaitTimeSeconds", func(f float64) { o.MaxWaitTimeSeconds = int64(f) }},
		{"priority", func(f float64) { o.Priority = int(f) }},
		{"maxPartitions", func(f float64) { o.MaxPartitions = int(f) }},
	} {
		f, ok, err := num(n.key)
		if err != nil {
			return o, err
		}
		if ok {
			if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e15 {
				return o, badRequest("options." + n.key + " is out of range")
			}
			n.set(f)
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{
		{"retentionEnabled", &o.RetentionEnabled},
		{"encryptionEnabled", &o.EncryptionEnabled},
		{"deadLetterQueue", &o.DeadLetterQueue},
		{"dlqAfterMaxRetries", &o.DLQAfterMaxRetries},
	} {
		if err := flag(f.key, f.dst); err != nil {
			return o, err
		}
	}
	return o, nil
}

// POST /api/v1/configure
//
// Creates a queue or replaces all its options; echoes the 15 options as
// stored, with the queue's id and its Default partition's id.
func (s *Server) handleConfigure(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Queue     *string        `json:"queue"`
		Namespace *string        `json:"namespace"`
		Task      *string        `json:"task"`
		Options   map[string]any `json:"options"`
	}
	if !s.decodeBody(w, r, &req, false) {
		return
	}
	if req.Queue == nil || *req.Queue == "" {
		writeError(w, http.StatusBadRequest, "queue is required")
		return
	}
	o, err := parseQueueOptions(req.Options)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if req.Namespace != nil {
		o.Namespace = *req.Namespace
	}
	if req.Task != nil {
		o.Task = *req.Task
	}
	if s.e == nil {
		s.configureWithoutEngine(w, r, *req.Queue, o)
		return
	}
	res, err := s.e.Configure(r.Context(), *req.Queue, o)
	if err == nil && s.cfg.Cluster != nil {
		err = s.cfg.Cluster.Configured(r.Context(), *req.Queue, res.Options)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeValue(w, http.StatusOK, configured{true, res.QueueID.String(), res.PartitionID.String(), *req.Queue, res.Options.Namespace, res.Options.Task, optionsJSON(&res.Options)})
}

// configured is configure's answer: the options as stored.
type configured struct {
	Configured  bool             `json:"configured"`
	QueueID     string           `json:"queueId"`
	PartitionID string           `json:"partitionId"`
	Queue       string           `json:"queue"`
	Namespace   string           `json:"namespace"`
	Task        string           `json:"task"`
	Options     queueOptionsJSON `json:"options"`
}

// configureWithoutEngine configures a queue on a broker of a replicated
// cluster (netserver.ConfigureAcross): queueId and partitionId are "".
func (s *Server) configureWithoutEngine(w http.ResponseWriter, r *http.Request, queue string, o engine.QueueOptions) {
	if s.cfg.Cluster == nil {
		notServedWithoutEngine(w, r)
		return
	}
	if err := netserver.ConfigureAcross(r.Context(), s.cfg.Cluster, queue, o); err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeValue(w, http.StatusOK, configured{true, "", "", queue, o.Namespace, o.Task, optionsJSON(&o)})
}

// DELETE /api/v1/resources/queues/{queue}
func (s *Server) handleDeleteQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	var existed bool
	var err error
	if s.cfg.Cluster != nil {
		existed, err = s.cfg.Cluster.DeleteQueue(r.Context(), name)
	} else {
		existed, err = s.e.DeleteQueue(r.Context(), name)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeValue(w, http.StatusOK, map[string]any{"deleted": true, "queue": name, "existed": existed})
}

// POST /api/v1/stats/refresh: Regent's figures are live; nothing to do.
func (s *Server) handleStatsRefresh(w http.ResponseWriter, r *http.Request) {
	s.writeValue(w, http.StatusOK, map[string]any{"success": true, "message": "statistics are computed live"})
}
