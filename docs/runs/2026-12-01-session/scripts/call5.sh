#!/bin/bash
# Call 5 (2026-12-01 session, issue 15): decode attention with each 64-position cache block's K and V loaded by TMA
# (scripts/probes/decode_tma_probe.py) against the engine's gathered loads on 16- and 64-position blocks, beside SDPA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 480 python3 scripts/probes/decode_tma_probe.py --json $OUT/decode_tma.json 2>&1 | grep -v -i warn \
  > $OUT/decode_tma.log
echo "probe rc $? ($SECONDS s)"; cat $OUT/decode_tma.log | cut -c1-400
