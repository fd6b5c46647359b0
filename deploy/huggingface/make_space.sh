#!/bin/sh
# Assemble a Hugging Face Space (Streamlit SDK) from this repository, e.g. into a clone of the
# Space:  deploy/huggingface/make_space.sh ../my-space   (see docs/deploy.md)
set -eu
out="${1:?usage: deploy/huggingface/make_space.sh DIR}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
cp -R "$root/app.py" "$root/app_pages" "$root/assets" "$root/flamino_core" "$root/.streamlit" "$out/"
cp "$root/deploy/huggingface/README.md" "$out/README.md"
# The same pins as everywhere else, minus the final "." line (flamino itself, needed only for
# the command line): a Space installs requirements.txt before it copies the repository, and the
# app imports flamino_core from the Space's own folder.
grep -vx '\.' "$root/requirements.txt" > "$out/requirements.txt"
find "$out" -name __pycache__ -type d -prune -exec rm -rf {} +
echo "Space files written to $out; commit and push them to the Space."
