#!/usr/bin/env bash
# The suite's first checks on a GPU, in one command (docs/performance.md, "On your GPU"):
#   scripts/gpu_check.sh [--device cuda|cpu] [--preset paper|tiny] [--repeats N] [--task-seconds S] [--out DIR]
# Defaults: cuda, the paper presets, 5 repeats, 80 s per task, DIR = $OUT or ./gpu_check. `--device cpu --preset
# tiny` is the same script as a dry run on a CPU (tests/experiments/test_gpu_check.py runs it so).
#
# 0. the Python: $PYTHON if set, else this checkout's .venv if it has one; else, where .whl/ holds wheels
#    (scripts/gpu_wheels.sh fetches them where pip reaches an index, for a machine that cannot), python3 with
#    them installed into a private folder with --no-index, nothing into the machine's own Python; else python3.
#    The checkout itself is on PYTHONPATH.
# 1. env.txt: the device, torch, CUDA and cuDNN versions.
# 2. for each paper task: `perf --device D --preset P --synthetic --amp both --scales 1,2 --check` under a time
#    limit of its own, so that one task that hangs or breaks costs only itself: examples/s of the bare loop, the
#    engine (fp32 and bf16), AdaScale/bare, peak memory at the preset's micro-batch, and --check's judgement of an
#    extra iteration of each engine variant (gain in [1, S], at most one host synchronisation, a finite loss);
#    every task's examples/s at S = 1 into throughput.csv (a copy of the shipped table: commit it to keep it).
# 3. `pytest -m gpu`: the tests that need CUDA (a tiny run on CUDA is the CPU's run to rounding,
#    bench.experiments.crossdevice; the CUDA speed knobs; the reliability test); on a CPU, collected only.
# Writes DIR/{env.txt, perf.csv, throughput.csv, pytest_gpu.log, gpu_check.log} (DIR new or empty); exits 1 if any
# step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
device=cuda preset=paper repeats=5 task_s=80 out="${OUT:-gpu_check}"
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device="$2"; shift 2 ;;
        --preset) preset="$2"; shift 2 ;;
        --repeats) repeats="$2"; shift 2 ;;
        --task-seconds) task_s="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "gpu_check.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
    esac
done
# every file below is written by a shell redirection or tee, which follow links: so only into a folder of our own,
# new or empty (nothing planted in it, nothing of someone's overwritten), reached through no link
if [ -L "$out" ] || { [ -e "$out" ] && [ -n "$(ls -A -- "$out" 2>/dev/null || echo unreadable)" ]; }; then
    echo "gpu_check.sh: --out $out must be a new or empty folder, not a link" >&2
    exit 2
fi
mkdir -p -- "$out" || exit 2
out="$(cd "$out" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")" || exit 2
exec > >(tee "$out/gpu_check.log") 2>&1
tee_pid=$!
trap 'exec 1>&- 2>&-; wait "$tee_pid"' EXIT  # the log complete before the script returns
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1  # the log: lines, not progress bars
py="${PYTHON:-}"
if [ -z "$py" ] && [ -x .venv/bin/python ]; then
    py=.venv/bin/python  # this checkout's installed environment (make .venv/.installed)
elif [ -z "$py" ] && compgen -G ".whl/*.whl" >/dev/null; then  # a bare machine: the carried wheels
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$work/site" .whl/*.whl \
        || { echo "gpu_check: the wheels in .whl/ did not install"; exit 2; }
    export PYTHONPATH="$work/site"
    py=python3
fi
py="${py:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
failed=()

"$py" - >"$out/env.txt" 2>&1 <<'EOF' || failed+=("env")
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"cuda:{i} {p.name}, {p.total_memory / 2**30:.1f} GiB, capability {p.major}.{p.minor}")
if not torch.cuda.is_available():
    print("no CUDA device:", platform.processor() or platform.machine())
EOF
cat "$out/env.txt"

"$py" -c 'import sys; from pathlib import Path; from bench.core.files import atomic_write_bytes as w
w(Path(sys.argv[2]), Path(sys.argv[1]).read_bytes())' bench/experiments/throughput.csv "$out/throughput.csv" \
    || failed+=("throughput.csv")  # the shipped table, the rows measured below updated in it
for task in cifar10 imagenet speech transformer yolo; do
    echo "== perf $task ($preset, $device) =="
    timeout --kill-after=10 "$task_s" "$py" -m bench perf --task "$task" --device "$device" --preset "$preset" \
        --synthetic --amp both --scales 1,2 --repeats "$repeats" --check --out "$work/perf_$task" \
        --write-throughput "$out/throughput.csv"
    rc=$?
    [ $rc -eq 0 ] || failed+=("perf $task (exit $rc$([ $rc -eq 124 ] && echo ", over ${task_s} s"))")
done
"$py" - "$work" "$out/perf.csv" <<'EOF' || failed+=("perf.csv")
import csv, sys
from pathlib import Path
from bench.core.files import write_csv_rows
from bench.experiments.perf import COLUMNS
tables = sorted(Path(sys.argv[1]).glob("perf_*/perf.csv"))
rows = [r for t in tables for r in csv.DictReader(t.open())]
write_csv_rows(Path(sys.argv[2]), COLUMNS, rows)  # perf's columns, every task's rows
print(f"perf.csv: {len(rows)} rows from {len(tables)} task(s)")
EOF

echo "== pytest -m gpu =="
if [ "$device" = cuda ]; then
    timeout --kill-after=10 120 "$py" -m pytest -q -m gpu -rP -p no:cacheprovider tests >"$out/pytest_gpu.log" 2>&1
else
    "$py" -m pytest -q -m gpu --collect-only -p no:cacheprovider tests >"$out/pytest_gpu.log" 2>&1
fi
rc=$?
tail -n 25 "$out/pytest_gpu.log"
[ $rc -eq 0 ] || failed+=("pytest -m gpu (exit $rc)")

rm -rf "$work"
if [ ${#failed[@]} -gt 0 ]; then
    printf 'gpu_check: failed: %s\n' "${failed[@]}"
    exit 1
fi
echo "gpu_check: every step passed; results in $out"
