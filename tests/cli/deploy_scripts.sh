#!/usr/bin/env bash
# The scripts around the CLI, run here without a GPU (the fake backend and
# stand-ins): the Slurm array script's shard checks and a run whose missing
# task the merged file's tune finishes; the main job's checks of PRESET and
# DB before its compile; deps.sh where it cannot install. Each once was
# checked by hand only (docs/RELIABILITY.md 1.5).
# Usage: deploy_scripts.sh MOETUNE
set -u
cli=$1
# shellcheck source=tests/cli/lib.sh disable=SC2034  # lib.sh uses $cli
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)

# run CODE PATTERN COMMAND...: exit status CODE and PATTERN on stderr.
run() {
    local code=$1 pattern=$2
    shift 2
    "$@" >"$dir/out" 2>"$dir/err"
    local rc=$?
    if [ "$rc" != "$code" ] || ! grep -qF -- "$pattern" "$dir/err"; then
        fail "$* -> exit $rc (want $code), stderr lacks '$pattern':"
        sed 's/^/    out: /' "$dir/out" | head -10
        sed 's/^/    err: /' "$dir/err" | head -10
    fi
}

# --- Slurm: `moetune` on PATH is the CLI under test, on the fake backend.
mkdir "$dir/bin" "$dir/slurm"
ln -s "$cli" "$dir/bin/moetune"
sbatch="$repo/deploy/slurm-tune-array.sbatch"
task() {   # task ID SHARDS: one array task of a qwen3 run over three M
    (cd "$dir/slurm" && PATH="$dir/bin:$PATH" SLURM_ARRAY_TASK_ID=$1 SHARDS=$2 \
        bash "$sbatch" qwen3-30b-a3b --backend fake --M 1,8,64)
}
run 2 "task 3 is outside the 3 shards (0 to 2): number the array 0-2" task 3 3
run 2 "SHARDS 'x' and the task id '0' must be whole numbers" task 0 x
run 1 "SHARDS is not set" env -u SHARDS SLURM_ARRAY_TASK_ID=0 bash "$sbatch" qwen3-30b-a3b
run 1 "not an array task" env -u SLURM_ARRAY_TASK_ID SHARDS=3 bash "$sbatch" qwen3-30b-a3b
[ ! -e "$dir/slurm/shards" ] || fail "a refused task made the shards folder"
# Tasks 0 and 1 of 3 run, task 2 is lost; the merge and the tune on the
# merged file (the header's last step) tune the lost shard's M only.
task 0 3 >/dev/null 2>&1 || fail "task 0 of 3 failed"
task 1 3 >/dev/null 2>&1 || fail "task 1 of 3 failed"
(cd "$dir/slurm" && "$cli" db merge tuned.db shards/shard-0.db shards/shard-1.db >/dev/null) ||
    fail "the merge of the shards failed"
(cd "$dir/slurm" && "$cli" tune --preset qwen3-30b-a3b --backend fake --M 1,8,64 --db tuned.db \
    >/dev/null 2>&1) || fail "the tune on the merged file failed"
# One history record per M: the shards' M were not tuned again.
hist=$("$cli" db show "$dir/slurm/tuned.db" --history | awk '$1 ~ /^[0-9]+$/ {print $1}' | sort -n | uniq -c |
       awk '{printf "%s:%s ", $2, $1}')
[ "$hist" = "1:1 8:1 64:1 " ] || fail "history records per M after the finishing tune: '$hist'"

# --- The main job: PRESET and DB refused before the compile (which takes
# minutes on a cold cache: a job that goes on is cut at 60 s and fails).
export MOETUNE="$cli"
job=$repo/scripts/main-job.sh
run 2 "main-job: no preset 'nope'; the presets:" env PRESET=nope timeout 60 bash "$job"
[ -s "$dir/out" ] && fail "main-job went on (info, compile) before refusing PRESET"
run 2 "main-job: DB '$dir/none/t.db': its folder does not exist" \
    env DB="$dir/none/t.db" timeout 60 bash "$job"
# Set but empty: refused, not the default (it once took the default).
run 2 "main-job: DB is empty" env DB= timeout 60 bash "$job"
run 2 "main-job: no preset ''" env PRESET= timeout 60 bash "$job"
# A relative DB is the caller's folder's: none/ under $dir/caller.
mkdir "$dir/caller"
# shellcheck disable=SC2016  # $1 and $2 are the inner shell's
run 2 "main-job: DB '$dir/caller/none/t.db'" bash -c 'cd "$1" && DB=none/t.db exec timeout 60 bash "$2"' _ \
    "$dir/caller" "$job"
unset MOETUNE

# --- deps.sh where it cannot install: stand-in tools on a PATH of its own.
mkdir "$dir/tools"
for t in bash grep id; do ln -s "$(command -v $t)" "$dir/tools/$t"; done
deps() { env PATH="$dir/tools" bash "$repo/scripts/deps.sh"; }
run 1 "deps: no dpkg-query or apt-get here (not a Debian system?)" deps
# Every package missing, not root, no sudo: named, nothing installed.
printf '#!/bin/bash\nexit 1\n' >"$dir/tools/dpkg-query"
printf '#!/bin/bash\necho "apt-get ran" >&2\nexit 1\n' >"$dir/tools/apt-get"
rm "$dir/tools/id"   # a link to the real one: not written through
printf '#!/bin/bash\necho 1000\n' >"$dir/tools/id"
chmod +x "$dir/tools/dpkg-query" "$dir/tools/apt-get" "$dir/tools/id"
run 1 "deps: not root and no sudo to install cmake pkg-config" deps
grep -q "apt-get ran" "$dir/err" && fail "deps.sh ran apt-get without sudo"
# Every package present, no CUDA toolkit where it is looked for.
printf '#!/bin/bash\necho -n "install ok installed"\n' >"$dir/tools/dpkg-query"
run 1 "deps: the CUDA toolkit is missing at $dir/nocuda" env CUDAToolkit_ROOT="$dir/nocuda" \
    PATH="$dir/tools" bash "$repo/scripts/deps.sh"

finish "deploy scripts: Slurm shard checks and finishing tune, main job checks, deps.sh refusals"
