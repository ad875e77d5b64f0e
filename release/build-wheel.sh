#!/usr/bin/env bash
# The release wheel of wheelfix: x86_64, glibc 2.17 (manylinux2014), so that pip accepts it in
# every manylinux image where `repair-wheel-command` runs (manylinux2014, manylinux_2_28, …).
#
#   release/build-wheel.sh [OUTPUT_DIR]      (default: dist/)
#
# maturin links with zig (the `ziglang` package from PyPI) against glibc 2.17's symbols, whatever
# the glibc of the build machine. Rust's std calls copy_file_range (glibc 2.27) through a weak
# reference that zig's linker will not leave unresolved; release/copy_file_range.c supplies it
# as the system call. Needs only Python 3 with pip, a Rust toolchain and network access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
venv=${WHEELFIX_RELEASE_VENV:-target/release-venv}
if [ ! -x "$venv/bin/maturin" ] || [ ! -f "$venv/.ready" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --disable-pip-version-check -q maturin==1.16.0 ziglang==0.17.1
    touch "$venv/.ready"
fi
mkdir -p target
"$venv/bin/python" -m ziglang cc -c -O2 -target x86_64-linux-gnu.2.17 -o target/copy_file_range.o release/copy_file_range.c
PATH="$PWD/$venv/bin:$PATH" RUSTFLAGS="-C link-arg=$PWD/target/copy_file_range.o" \
    "$venv/bin/maturin" build --release --quiet --zig --compatibility manylinux2014 \
    --target x86_64-unknown-linux-gnu -o "$out"
