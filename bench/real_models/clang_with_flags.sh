#!/bin/sh
# A clang for SVOD_CLANG that appends REAL_MODELS_CLANG_FLAGS to svod's own flags: the last -O
# wins, so "-O3" compiles svod's kernels at -O3 with no change to svod. real_models.py gives each
# such compiler its own svod and tinygrad caches (their keys do not see these flags).
exec "${REAL_MODELS_CLANG:-clang-19}" "$@" ${REAL_MODELS_CLANG_FLAGS:-}
