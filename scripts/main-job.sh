#!/usr/bin/env bash
# The main job. With a GPU: tune a model shape (PRESET, default
# qwen3-30b-a3b) over the default M sweep into DB (default moetune.db) and
# print the summary table. Without a GPU: generate and compile the default
# kernel set ahead of time for sm_90a and sm_80 with NVRTC (into the compile
# cache), and say what needs a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/moetune
"$bin" info
"$bin" gen compile --defaults --arch sm_90a,sm_80 --progress
if "$bin" info | grep -q "^GPU: none"; then
  echo "main-job: no GPU here: kernels are compiled and cached; 'moetune tune' and 'moetune bench' need a GPU."
  exit 0
fi
"$bin" tune --preset "${PRESET:-qwen3-30b-a3b}" --db "${DB:-moetune.db}"
