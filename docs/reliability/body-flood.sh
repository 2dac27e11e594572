#!/usr/bin/env bash
# Peak RSS of a broker while 200 connections each send a 64 MiB request body
# to the HTTP door at once (RELIABILITY.md, "Request bodies in flight").
# Linux, as root (it resets the broker's peak RSS through
# /proc/PID/clear_refs); needs curl.
#
#   docs/reliability/body-flood.sh
#
# Each body is 64 MiB of JSON that names no item (the broker reads all of it,
# then answers 400), so what the broker holds is the bodies themselves.
set -eu
cd "$(dirname "$0")/../.."
W=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$W"' EXIT
go build -o "$W/regent" ./cmd/regent
HTTP=${HTTP:-127.0.0.1:17642}
"$W/regent" serve --data "$W/data" --tcp "${TCP:-127.0.0.1:17643}" --http "$HTTP" --log-level warn > "$W/serve.out" 2>&1 &
PID=$!
for _ in $(seq 1 100); do grep -q tcp "$W/serve.out" && break; sleep 0.1; done
{ printf '{"items":['; head -c $((64 * 1024 * 1024 - 14)) /dev/zero | tr '\0' ' '; printf ']}'; } > "$W/body"
rss() { awk '/VmRSS/{print $2}' /proc/$PID/status; }
hwm() { awk '/VmHWM/{print $2}' /proc/$PID/status; }
echo 5 > /proc/$PID/clear_refs
before=$(rss)
for _ in $(seq 1 200); do
	curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' --data-binary @"$W/body" "http://$HTTP/api/v1/push" >> "$W/codes" &
done
wait $(jobs -p | grep -v "^$PID$") 2>/dev/null || true
peak=$(hwm)
echo "before: rss $((before / 1024)) MiB; peak during the flood: $((peak / 1024)) MiB; growth $(((peak - before) / 1024)) MiB"
echo "answers: $(sort "$W/codes" | uniq -c | tr '\n' ' ')"
