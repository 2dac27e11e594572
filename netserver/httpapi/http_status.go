package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/regentmq/regent/protocol"
)

// Health, the dashboard's status feeds, and the maintenance toggles.

// healthy is the engine's Healthy; nil without one (a replicated broker's
// journal failing stops the broker).
func (s *Server) healthy() error {
	if s.e == nil {
		return nil
	}
	return s.e.Healthy()
}

// GET /health: 200 {"status":"healthy",...}, or 503 "unhealthy" when the
// engine is closed or its journal failed (Queen's "database" field says
// whether the journal takes writes).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	status, db, code := "healthy", "connected", http.StatusOK
	var reason any
	journal, tcp := "ok", "ok"
	if err := s.healthy(); err != nil {
		status, db, code, reason = "unhealthy", "disconnected", http.StatusServiceUnavailable, err.Error()
		journal = err.Error()
	}
	if f := s.cfg.TCPHealth; f != nil {
		if err := f(); err != nil {
			status, code, tcp = "unhealthy", http.StatusServiceUnavailable, err.Error()
			if reason == nil {
				reason = err.Error()
			}
		}
	}
	v := map[string]any{
		"status": status, "database": db, "server": "Regent", "worker_id": 0, "version": s.cfg.Version,
		"shared_state": map[string]any{"enabled": false},
		"queen":        map[string]any{"worker_id": 0, "status": "active"},
		"error":        reason,
		// Regent's: each part, "ok" or why not (the HTTP door answers this).
		"doors": map[string]any{"http": "ok", "tcp": tcp}, "journal": journal,
	}
	if cl := s.cfg.Cluster; cl != nil {
		if md := cl.Metadata(); md.Cluster != "" {
			etcd := "ok"
			if err := cl.Health(r.Context()); err != nil {
				etcd = err.Error()
			}
			v["cluster"] = map[string]any{"name": md.Cluster, "node": md.Node, "epoch": md.Epoch, "controller": md.Controller, "etcd": etcd}
		}
	}
	s.writeValue(w, code, v)
}

// GET /api/v1/cluster
//
// The cluster's shard map as this broker knows it (Regent's: Queen runs
// one server): the same fields as the binary protocol's Metadata, each
// shard's owner by id. A broker that runs alone answers {"cluster": ""}.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	md := &protocol.MetadataReply{}
	if cl := s.cfg.Cluster; cl != nil {
		md = cl.Metadata()
	}
	owners := make([]string, len(md.Owners))
	for i, o := range md.Owners {
		if o >= 0 && int(o) < len(md.Brokers) {
			owners[i] = md.Brokers[o].ID
		}
	}
	brokers := make([]map[string]any, len(md.Brokers))
	for i, b := range md.Brokers {
		brokers[i] = map[string]any{"id": b.ID, "tcp": b.TCP, "http": b.HTTP, "live": b.Live}
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"cluster": md.Cluster, "node": md.Node, "epoch": md.Epoch, "seed": strconv.FormatUint(md.Seed, 10),
		"shards": md.Shards, "owners": owners, "brokers": brokers, "controller": md.Controller,
	})
}

// GET /api/v1/status?from=&to=&queue=&namespace=&task=
//
// The dashboard's overview: throughput per minute over the time range
// (default the last hour; kept for 24 hours, from samples the server takes
// while it runs), and the current messages, leases and dead letters.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.RawQuery
	since, until, err := timeRange(raw, time.Hour, time.Now().UnixNano())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if until == 0 {
		until = time.Now().UnixNano()
	}
	vs := s.filterHeads(raw)
	var c msgCounts
	active, batch, deadParts := 0, uint64(0), 0
	for i := range vs {
		a := s.aggregate(&vs[i], 0, nil)
		c.add(a.counts)
		active += a.leases
		batch += a.leaseBatch
		if vs[i].DeadLetters > 0 {
			deadParts += s.e.DeadLetterPartitions(vs[i].Name)
		}
	}
	series := s.met.smp.series(since, until)
	points := make([]map[string]any, len(series))
	for i, b := range series {
		points[i] = map[string]any{
			"timestamp": fmtTime(b.minute * int64(time.Minute)), "ingested": b.pushed, "processed": b.acked,
			"popped": b.popped, "ingestedPerSecond": float64(b.pushed) / 60, "processedPerSecond": float64(b.acked) / 60,
		}
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"timeRange":     map[string]any{"from": fmtTime(since), "to": fmtTime(until)},
		"bucketMinutes": 1,
		"pointCount":    len(points),
		"throughput":    points,
		"queues":        len(vs),
		"messages":      c,
		"leases":        map[string]any{"active": active, "partitionsWithLeases": active, "totalBatchSize": batch},
		"deadLetterQueue": map[string]any{"totalMessages": c.DeadLetter, "affectedPartitions": deadParts,
			"topErrors": []any{}},
		"workers":  []any{},
		"errors":   []any{},
		"statsAge": 0,
	})
}

// GET /api/v1/status/queues?namespace=&task=&limit=100&offset=0
func (s *Server) handleStatusQueues(w http.ResponseWriter, r *http.Request) {
	vs := s.filterHeads(r.URL.RawQuery)
	limit, offset, err := paging(r.URL.RawQuery, 100)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	page := window(vs, limit, offset)
	out := make([]queueSummary, len(page))
	for i := range page {
		out[i] = s.summarize(&page[i])
	}
	s.writeValue(w, http.StatusOK, map[string]any{"queues": out,
		"pagination": map[string]int{"limit": limit, "offset": offset, "total": len(vs)}})
}

// GET /api/v1/status/queues/{queue}?limit=1000&offset=0&after=<partition id>
//
// The partitions are a page, as in GET /api/v1/resources/queues/{queue};
// totals sum every partition.
func (s *Server) handleStatusQueue(w http.ResponseWriter, r *http.Request) {
	v, err := s.e.ViewQueueHead(r.PathValue("queue"))
	if err != nil {
		writeError(w, http.StatusNotFound, "Queue not found")
		return
	}
	req, err := partitionPageOf(r.URL.RawQuery)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	pg, err := s.e.ViewPartitions(v.Name, req)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	dead := s.deadCounts(v.Name, pg.Partitions)
	o := &v.Options
	parts := make([]map[string]any, len(pg.Partitions))
	for i := range pg.Partitions {
		p := &pg.Partitions[i]
		c := partitionCounts(p, dead[i])
		var consumed uint64
		for _, g := range p.Groups {
			consumed = max(consumed, g.Cursor)
		}
		parts[i] = map[string]any{
			"id": p.ID.String(), "name": p.Name, "createdAt": timePtr(p.Oldest),
			"messages":     map[string]any{"total": c.Total, "pending": c.Pending, "processing": c.Processing},
			"stats":        c,
			"cursor":       map[string]any{"totalConsumed": consumed, "batchesConsumed": nil},
			"lastActivity": timePtr(p.Newest),
		}
	}
	s.writeValue(w, http.StatusOK, map[string]any{
		"queue": map[string]any{
			"id": v.ID.String(), "name": v.Name, "namespace": o.Namespace, "task": o.Task, "priority": o.Priority,
			"createdAt": fmtTime(v.Created),
			"config": map[string]any{"leaseTime": o.LeaseTime.Seconds(), "retryLimit": o.RetryLimit,
				"retryDelay": o.RetryDelay.Milliseconds(), "ttl": o.TTL.Seconds(), "maxQueueSize": o.MaxSize,
				"deadLetterQueue": o.DeadLetterQueue},
		},
		"partitions": parts,
		"totals":     s.aggregate(&v, 0, nil).counts,
		"pagination": partitionPagination(&pg, req.Limit),
	})
}

// GET /api/v1/status/analytics?interval=hour|day|week|month&from=&to=
//
// Messages pushed per minute over the interval (from the samples of the
// last 24 hours).
func (s *Server) handleAnalytics(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.RawQuery
	interval := queryParam(raw, "interval")
	span := time.Hour
	switch interval {
	case "day":
		span = 24 * time.Hour
	case "week":
		span = 7 * 24 * time.Hour
	case "month":
		span = 30 * 24 * time.Hour
	default:
		interval = "hour"
	}
	since, until, err := timeRange(raw, span, time.Now().UnixNano())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if until == 0 {
		until = time.Now().UnixNano()
	}
	series := s.met.smp.series(since, until)
	points := make([]map[string]any, len(series))
	for i, b := range series {
		points[i] = map[string]any{"timestamp": fmtTime(b.minute * int64(time.Minute)), "messages": b.pushed}
	}
	s.writeValue(w, http.StatusOK, map[string]any{"dataPoints": points, "interval": interval,
		"from": fmtTime(since), "to": fmtTime(until)})
}

// GET /api/v1/status/buffers: Regent has no file buffer (pushes go to its
// journal), so nothing is ever pending there.
func (s *Server) handleBuffers(w http.ResponseWriter, r *http.Request) {
	s.writeValue(w, http.StatusOK, map[string]any{"pending": 0, "failed": 0, "dbHealthy": s.e.Healthy() == nil,
		"worker": 0, "note": "Regent has no file buffer: pushes are written to its journal"})
}

// GET|POST /api/v1/system/maintenance {"enabled":bool}
//
// Queen's push maintenance mode diverts pushes to a file buffer while its
// database is maintained. Regent's journal is its buffer and always takes
// writes, so the flag is kept and reported but pushes go on being stored
// (and answered "queued"); nothing is ever buffered.
func (s *Server) handleMaintenance(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		var req struct {
			Enabled *bool `json:"enabled"`
		}
		if !s.decodeBody(w, r, &req, false) {
			return
		}
		if req.Enabled == nil {
			writeError(w, http.StatusBadRequest, "enabled (boolean) is required")
			return
		}
		s.maintenance.Store(*req.Enabled)
		msg := "Maintenance mode disabled"
		if *req.Enabled {
			msg = "Maintenance mode enabled (Regent keeps storing pushes in its journal)"
		}
		s.writeValue(w, http.StatusOK, map[string]any{"maintenanceMode": *req.Enabled, "bufferedMessages": 0,
			"bufferHealthy": true, "message": msg})
		return
	}
	s.writeValue(w, http.StatusOK, map[string]any{"maintenanceMode": s.maintenance.Load(),
		"popMaintenanceMode": s.popMaintenance.Load(), "bufferedMessages": 0, "bufferHealthy": true,
		"bufferStats": map[string]any{"pending": 0, "failed": 0}})
}

// GET|POST /api/v1/system/maintenance/pop {"enabled":bool}: while on, every
// pop answers 204 (nothing is delivered).
func (s *Server) handlePopMaintenance(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		var req struct {
			Enabled *bool `json:"enabled"`
		}
		if !s.decodeBody(w, r, &req, false) {
			return
		}
		if req.Enabled == nil {
			writeError(w, http.StatusBadRequest, "enabled (boolean) is required")
			return
		}
		s.popMaintenance.Store(*req.Enabled)
	}
	on := s.popMaintenance.Load()
	msg := "Pop maintenance mode disabled"
	if on {
		msg = "Pop maintenance mode enabled: pops answer 204"
	}
	s.writeValue(w, http.StatusOK, map[string]any{"popMaintenanceMode": on, "message": msg})
}
