#!/usr/bin/env python3
"""The Kubernetes Indexed Job (deploy/k8s-tune-indexed-job.yaml), checked
without a cluster: SHARDS equals .spec.completions; the indexes that fail at
once are exit 2 and 3, the CLI's bad-usage and no-GPU codes; and the
container's command, run here for each completion index with the CLI under
test on the fake backend (its /results in a temporary folder), tunes each
shard into its own database, whose merge holds every M of the preset once.
Exit 77 (skipped) without PyYAML. Usage: k8s_job.py MOETUNE
"""
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("k8s_job: PyYAML is not installed (python3-yaml): skipped")
    sys.exit(77)

cli = os.path.abspath(sys.argv[1])
repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
with open(os.path.join(repo, "deploy", "k8s-tune-indexed-job.yaml")) as f:
    job = yaml.safe_load(f)
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)


spec = job["spec"]
container = spec["template"]["spec"]["containers"][0]
env = {e["name"]: e["value"] for e in container.get("env", [])}
check(spec.get("completionMode") == "Indexed", "completionMode is not Indexed")
check(env.get("SHARDS") == str(spec["completions"]),
      f"SHARDS {env.get('SHARDS')} is not .spec.completions {spec['completions']}")
rule = spec["podFailurePolicy"]["rules"][0]
check(rule["action"] == "FailIndex" and rule["onExitCodes"]["containerName"] == container["name"],
      "the FailIndex rule does not name the tune container")
check(sorted(rule["onExitCodes"]["values"]) == [2, 3], "FailIndex is not on exit 2 and 3")
help_text = subprocess.run([cli, "--help"], capture_output=True, text=True).stdout
check("2 bad usage" in help_text and "3 needs a GPU" in help_text,
      "moetune --help no longer says exit 2 is bad usage and 3 a missing GPU")
check(spec["template"]["spec"]["restartPolicy"] == "Never", "restartPolicy is not Never")

shell, command = container["command"][0], " ".join(container["command"][1:] + container["args"])
preset = re.search(r"--preset (\S+)", command).group(1)
with tempfile.TemporaryDirectory() as tmp:
    # `moetune` on PATH: the CLI under test on the fake backend.
    os.mkdir(os.path.join(tmp, "bin"))
    stand_in = os.path.join(tmp, "bin", "moetune")
    with open(stand_in, "w") as f:
        f.write(f'#!/bin/sh\nexec "{cli}" "$@" --backend fake\n')
    os.chmod(stand_in, 0o755)
    script = container["args"][0].replace("/results", tmp)
    shards = int(env["SHARDS"])
    for i in range(shards):
        run_env = dict(os.environ, PATH=f"{tmp}/bin:{os.environ['PATH']}", JOB_COMPLETION_INDEX=str(i),
                       SHARDS=env["SHARDS"])
        r = subprocess.run([shell, "-c", script], env=run_env, capture_output=True, text=True)
        check(r.returncode == 0, f"index {i}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    dbs = [os.path.join(tmp, f"shard-{i}.db") for i in range(shards)]
    check(all(os.path.exists(d) for d in dbs), "a shard wrote no database")
    merged = os.path.join(tmp, "tuned.db")
    r = subprocess.run([cli, "db", "merge", merged] + [d for d in dbs if os.path.exists(d)],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"merge: exit {r.returncode}: {r.stderr.strip()}")
    if r.returncode == 0:
        con = sqlite3.connect(merged)
        ms = [m for (m,) in con.execute("select M from entry order by M")]
        con.close()
        presets = subprocess.run([cli, "tune", "--help"], capture_output=True, text=True).stdout
        default_m = re.search(r"--M LIST\s+token counts \(default ([\d\s]+)", presets)
        want = [int(x) for x in default_m.group(1).split()] if default_m else None
        check(want is not None and ms == sorted(want),
              f"the merged shards hold M {ms}, not the default sweep {want} once each")

if fails:
    for f in fails:
        print("FAIL:", f)
    sys.exit(1)
print(f"k8s job: {shards} indexes of {preset} tuned into their shards, merged to the whole sweep")
