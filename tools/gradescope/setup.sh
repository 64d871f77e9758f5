#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image (Ubuntu base image, as root),
# from /autograder/source, which holds the unpacked autograder.zip (tools/gradescope/package.py).
set -euo pipefail
cd /autograder/source
apt-get update
apt-get install -y --no-install-recommends software-properties-common
if ! command -v python3.11 >/dev/null; then
  add-apt-repository -y ppa:deadsnakes/ppa && apt-get update
fi
apt-get install -y --no-install-recommends python3.11 python3.11-venv
python3.11 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# The CPU build of the pinned torch: no CUDA libraries in the image.
TORCH="$(grep -E '^torch==' constraints.txt)"
.venv/bin/python -m pip install --quiet "$TORCH" --index-url https://download.pytorch.org/whl/cpu
.venv/bin/python -m pip install --quiet -r requirements.txt -c constraints.txt
.venv/bin/python -m pip install --quiet --no-deps -e .
MPLBACKEND=Agg .venv/bin/python -c "import matplotlib.pyplot"   # font cache, once
chmod +x run_autograder
