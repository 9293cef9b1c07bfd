#!/usr/bin/env bash
# Fetch, here (where pip reaches an index), the wheels a GPU machine without this project's dependencies needs,
# for its Python (3.12 by default), into .whl/ (git-ignored): the packages the device image lacks (see
# scripts/gpu_check.sh), at the versions this checkout's .venv runs, so both machines test the same code.
#   scripts/gpu_wheels.sh [PYTHON_VERSION]      e.g. scripts/gpu_wheels.sh 3.12
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:-3.12}"
venv=.venv/bin/python
[ -x "$venv" ] || { echo "gpu_wheels.sh: no .venv here; run 'make .venv/.installed' first" >&2; exit 2; }
# what the device image lacks (pydantic and its parts, submitit, soundfile and cffi, orjson, ultralytics)
names=(pydantic pydantic_core annotated-types typing-inspection typing_extensions submitit soundfile cffi pycparser
       orjson ultralytics ultralytics-thop)
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
mkdir -p .whl
for name in "${names[@]}"; do
    version=$("$venv" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')
    [ -n "$version" ] || { echo "gpu_wheels.sh: $name is not installed in .venv" >&2; exit 2; }
    plat=()
    for n in 17 24 27 28 31 34 35; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
        "${plat[@]}" --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$name==$version"
done
ls -1 .whl
du -sh .whl
