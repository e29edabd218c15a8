# Sourced first by a device call's script (docs/measurements/*/device-call*.sh),
# in the repository root on the GPU machine: unpacks the binaries staged by
# gpu-prepare.sh where they were gzipped to fit the carry, prints the GPU
# ("== NAME, DRIVER, SM CLOCK, MEMORY CLOCK"), sources gpu-env.sh ($out,
# the staged templates and libraries) and defines left: the seconds of the
# call left, of MT_CALL_LIMIT (default 570, under the tool's 600) counted
# from here; and pack_tuned_db, the end of a call that tuned into
# $out/nvidia-h200.db.
T0=$(date +%s)
left() { echo $(( ${MT_CALL_LIMIT:-570} - ($(date +%s) - T0) )); }
if compgen -G ".gpu/bin/*.gz" >/dev/null; then
  gunzip -f .gpu/bin/*.gz
fi
chmod +x .gpu/bin/*
gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader)
echo "== $gpu"
. scripts/gpu-env.sh

# pack_tuned_db WHAT: gpu_runtime on $out/nvidia-h200.db (WHAT names it in
# the summary line) with the time left, then its log and the file gzipped
# (the file checkpointed first) to come back, $out listed, the call's time.
pack_tuned_db() {
  MT_SHIPPED_DB="$out/nvidia-h200.db" timeout $(( $(left) - 5 )) .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
  echo "== gpu_runtime on $1: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
  (cd "$out" && gzip -9 runtime.log &&
    python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()" &&
    gzip -9 nvidia-h200.db && ls -la)
  echo "== call: $(( $(date +%s) - T0 )) s"
}
