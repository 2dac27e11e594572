#!/usr/bin/env bash
# Peak RSS of a broker answering pops of 1 MiB messages (RELIABILITY.md,
# "Pop replies are bounded by bytes"). Linux, as root (it resets the
# broker's peak RSS through /proc/PID/clear_refs).
#
#   POPS=1  docs/reliability/pop-rss.sh   # three concurrent pops of batch 400
#   POPS=10 docs/reliability/pop-rss.sh   # three groups draining, ten pops each
#
# It pushes 1,200 messages of 1 MiB with `regent push`, then three groups
# each pop POPS times with --batch 400 --ack completed, all at once, and
# prints the broker's RSS before the pops and its peak during them.
set -eu
cd "$(dirname "$0")/../.."
W=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$W"' EXIT
go build -o "$W/regent" ./cmd/regent
R="$W/regent"
TCP=${TCP:-127.0.0.1:17633}
"$R" serve --data "$W/data" --tcp "$TCP" --http "${HTTP:-127.0.0.1:17632}" --log-level warn > "$W/serve.out" 2>&1 &
PID=$!
for _ in $(seq 1 100); do grep -q tcp "$W/serve.out" && break; sleep 0.1; done
A="--addr $TCP"
head -c $((900 * 1024 * 1200)) /dev/urandom | base64 -w 1048576 | head -n 1200 > "$W/lines"
split -l 10 "$W/lines" "$W/part."
for f in "$W"/part.*; do "$R" push big - $A < "$f" > /dev/null; done
rm -f "$W/lines" "$W"/part.*
rss() { awk '/VmRSS/{print $2}' /proc/$PID/status; }
hwm() { awk '/VmHWM/{print $2}' /proc/$PID/status; }
echo 5 > /proc/$PID/clear_refs # peak RSS from here
before=$(rss)
for g in 1 2 3; do
	(for _ in $(seq 1 "${POPS:-1}"); do "$R" pop big --group "g$g" --batch 400 --ack completed $A > /dev/null 2>&1 || true; done) &
done
wait $(jobs -p | grep -v "^$PID$") 2>/dev/null || true
peak=$(hwm)
echo "before pops: rss $((before / 1024)) MiB; peak during pops: $((peak / 1024)) MiB; growth $(((peak - before) / 1024)) MiB"
"$R" queue big $A --json | python3 -c 'import json,sys; q=json.load(sys.stdin); print("cursors:", sorted((g["group"], g["cursor"]) for g in q["partitions"][0]["groups"]))'
