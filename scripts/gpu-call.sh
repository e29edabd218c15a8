# Sourced first by a device call's script (docs/measurements/*/device-call*.sh),
# in the repository root on the GPU machine: unpacks the binaries staged by
# gpu-prepare.sh where they were gzipped to fit the carry, prints the GPU
# ("== NAME, DRIVER, SM CLOCK, MEMORY CLOCK"), sources gpu-env.sh ($out,
# the staged templates and libraries) and defines left: the seconds of the
# call left, of MT_CALL_LIMIT (default 570, under the tool's 600) counted
# from here.
T0=$(date +%s)
left() { echo $(( ${MT_CALL_LIMIT:-570} - ($(date +%s) - T0) )); }
if compgen -G ".gpu/bin/*.gz" >/dev/null; then
  gunzip -f .gpu/bin/*.gz
fi
chmod +x .gpu/bin/*
gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader)
echo "== $gpu"
. scripts/gpu-env.sh
