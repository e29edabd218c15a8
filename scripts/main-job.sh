#!/usr/bin/env bash
# The main job. With a GPU: tune a model shape (PRESET, default
# qwen3-30b-a3b) over the default M sweep into DB (default moetune.db, a
# path from the caller's folder) and print the summary table. The defaults
# are for unset variables; one set empty is refused (exit 2). Without a GPU:
# generate and compile the default kernel set ahead of time for sm_90a and
# sm_80 with NVRTC (into the compile cache), and say what needs a GPU.
set -euo pipefail
preset=${PRESET-qwen3-30b-a3b}
db=${DB-moetune.db}
[ -n "$db" ] || { echo "main-job: DB is empty" >&2; exit 2; }
# DB is the caller's path: made absolute before the change of folder.
case "$db" in /*) ;; *) db="$PWD/$db" ;; esac
cd "$(dirname "$0")/.."
# MOETUNE: another build's CLI, an absolute path (the tests pass theirs).
bin=${MOETUNE:-build/moetune}
# Both checked before the compile, which takes minutes on a cold cache.
if ! "$bin" tune --list-presets | awk 'NR > 1 {print $1}' | grep -qxF -- "$preset"; then
  echo "main-job: no preset '$preset'; the presets:" >&2
  "$bin" tune --list-presets >&2
  exit 2
fi
if [ ! -d "$(dirname "$db")" ] || [ ! -w "$(dirname "$db")" ]; then
  echo "main-job: DB '$db': its folder does not exist or cannot be written" >&2
  exit 2
fi
"$bin" info
"$bin" gen compile --defaults --arch sm_90a,sm_80 --progress
if "$bin" info | grep -q "^GPU: none"; then
  echo "main-job: no GPU here: kernels are compiled and cached; 'moetune tune' and 'moetune bench' need a GPU."
  exit 0
fi
"$bin" tune --preset "$preset" --db "$db"
