#!/usr/bin/env bash
# The release wheel of wheelfix: x86_64 or aarch64, glibc 2.17 (manylinux2014), so that pip
# accepts it in every manylinux image where `repair-wheel-command` runs (manylinux2014,
# manylinux_2_28, …).
#
#   release/build-wheel.sh [--target x86_64|aarch64] [OUTPUT_DIR]      (default: x86_64, dist/)
#
# aarch64 is cross-built on any machine (`rustup target add aarch64-unknown-linux-gnu` is run
# when the target is missing); zig is the cross linker and C compiler.
#
# maturin links with zig (the `ziglang` package from PyPI) against glibc 2.17's symbols, whatever
# the glibc of the build machine. Rust's std calls copy_file_range (glibc 2.27) through a weak
# reference that zig's linker will not leave unresolved; release/copy_file_range.c supplies it
# as the system call. Needs only Python 3 with pip, a Rust toolchain and network access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=x86_64
if [ "${1:-}" = "--target" ]; then
    arch=${2:?--target needs x86_64 or aarch64}
    shift 2
fi
case "$arch" in
    x86_64|aarch64) ;;
    *) echo "release/build-wheel.sh: --target must be x86_64 or aarch64, not $arch" >&2; exit 2 ;;
esac
triple="$arch-unknown-linux-gnu"
out=${1:-dist}
if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
    rustup target add "$triple"
fi
venv=${WHEELFIX_RELEASE_VENV:-target/release-venv}
mkdir -p target
# Two builds at once (x86_64 and aarch64) make the tools venv once: the second waits.
exec 9>"target/.release-venv.lock"
flock 9
if [ ! -x "$venv/bin/maturin" ] || [ ! -f "$venv/.ready" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --disable-pip-version-check -q maturin==1.16.0 ziglang==0.17.1
    touch "$venv/.ready"
fi
flock -u 9
"$venv/bin/python" -m ziglang cc -c -O2 -target "$arch-linux-gnu.2.17" -o "target/copy_file_range-$arch.o" release/copy_file_range.c
PATH="$PWD/$venv/bin:$PATH" RUSTFLAGS="-C link-arg=$PWD/target/copy_file_range-$arch.o" \
    "$venv/bin/maturin" build --release --quiet --zig --compatibility manylinux2014 \
    --target "$triple" -o "$out"
