#!/usr/bin/env bash
# Session 38, call 6, with the device time left (about 270 s): does a wider
# search find faster bf16 M = 8 pipelines than the H200's picks, on this
# card? Mixtral and Qwen3 M = 8 are the table's two points under 0.97x the
# peer. Staged from main (52d6dde's code), carry [".gpu"].
# The shipped file renamed to this card (db_as_this_gpu), then a retune of
# M = 8 with 24 GEMM1 candidates (12 GEMM2): the stored pipeline is timed
# again beside the new candidates and the faster kept; the tuner's log and
# table say which won and by how much.
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-200}
. scripts/gpu-call.sh
db_as_this_gpu db/tuned/nvidia-h200.db "$out/m8.db"
for p in qwen3-30b-a3b mixtral-8x7b; do
  timeout $(( $(left) / 2 - 5 )) .gpu/bin/moetune tune --preset "$p" --M 8 --retune --max-candidates 24 \
    --db "$out/m8.db" >"$out/tune-$p.log" 2>&1
  echo "== $p: exit $?"; grep -E "^\| 8 " "$out/tune-$p.log" | tail -2
done
# Each M = 8 candidate's time (the search's, the stored pipeline's, the
# default's), fastest first, and the entry kept.
python3 - "$out/m8.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for E, in c.execute("select distinct k.E from candidate x join problem_key k on k.id = x.key_id where x.M = 8 and x.recorded > strftime('%s','now') - 3600"):
    print(f"== E={E} candidates (us, pipeline's GEMMs):")
    for t, pl in c.execute("select x.time_us, x.pipeline from candidate x join problem_key k on k.id = x.key_id where k.E = ? and k.quant = 'none' and k.routing = 'uniform' and x.M = 8 and x.status = 'ok' and x.time_us is not null and x.recorded > strftime('%s','now') - 3600 order by x.time_us limit 8", (E,)):
        g = [s.split('=', 1)[1] for s in pl.split(';') if s.startswith(('gemm1=', 'gemm2='))]
        print(f"==   {t:7.1f} {' '.join(g) or pl[:60]}")
    for t, pl in c.execute("select e.time_us, e.pipeline from entry e join problem_key k on k.id = e.key_id where k.E = ? and e.M = 8 and k.quant = 'none' and k.routing = 'uniform'", (E,)):
        print(f"==   kept {t:.1f}: {pl[:200]}")
PY
rm -f "$out/m8.db"*; gzip -9 "$out"/tune-*.log
echo "== call: $(( $(date +%s) - T0 )) s"
