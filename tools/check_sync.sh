#!/usr/bin/env bash
# Fails when the notebooks, the generated package or README.md are out of sync:
# nbdev-export and nbdev-clean must change nothing, and README.md must equal what nbs/index.ipynb makes.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
snap() { find nbs mdlm_kit -type f \( -name '*.ipynb' -o -name '*.py' \) -not -path '*/.ipynb_checkpoints/*' -print0 | sort -z | xargs -0 sha256sum; }
before=$(snap)
"$BIN/nbdev-export"
"$BIN/nbdev-clean"
after=$(snap)
if [ "$before" != "$after" ]; then
  echo "Out of sync: nbdev-export/nbdev-clean changed these files (run 'make clean-nbs' and commit):"
  diff <(echo "$before") <(echo "$after") | grep '^>' | awk '{print "  " $3}'
  exit 1
fi
"$BIN/python" tools/make_readme.py --check
echo "sync check: notebooks, package and README.md agree"
