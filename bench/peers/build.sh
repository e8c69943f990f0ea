#!/usr/bin/env bash
# Fetch and build the llama.cpp/ggml peer, and install the PyTorch one
# (make peers).
#
# llama.cpp's full source ships inside the npm package node-llama-cpp as a git
# bundle (llama/gitRelease.bundle). This script fetches the pinned package with
# `npm pack`, checks the tarball itself against the pinned sha512 integrity
# (npm's own dist.integrity format), clones the bundle, records the llama.cpp
# commit and builds, with cmake + ninja, only what kvlab's peer harnesses need:
# the ggml CPU library, libllama, llama-bench and llama-convert-llama2c-to-ggml.
# Nothing of llama.cpp is copied into the project: it is built from its own
# source here, at build time.
#
# Everything lives under $PEERS_DIR (build/peers). A finished build leaves
# $PEERS_DIR/stamp-<version>; with it present the script builds nothing.
# PyTorch is Debian's python3-torch, run by /usr/bin/python3 (the python3
# on PATH may be another interpreter without Debian's modules); installed
# with apt-get when missing and run as root.
#
#   bash bench/peers_build.sh VERSION INTEGRITY [PEERS_DIR]
#
# Exit: 0 built (or already built), 1 the build failed or the checksum did not
# match (the fetched tarball is deleted), 2 a tool or the network is missing
# (one line naming it and the command to run).
set -euo pipefail

version=${1:?version}
integrity=${2:?integrity}
dir=${3:-build/peers}
pkg=node-llama-cpp
stamp="$dir/stamp-$version"
jobs=${PEERS_JOBS:-$(nproc 2>/dev/null || echo 2)}
py=${PEERS_PY:-/usr/bin/python3}

# ---- tools --------------------------------------------------------------
# Debian's npm conflicts with a nodejs installed from elsewhere, so npm is only
# asked for when no npm is on PATH at all.
need=""
if [ ! -f "$stamp" ]; then
  for t in cmake:cmake ninja:ninja-build g++:g++ git:git npm:npm; do
    command -v "${t%%:*}" >/dev/null 2>&1 || need="$need ${t##*:}"
  done
fi
"$py" -c 'import torch, numpy' >/dev/null 2>&1 || need="$need python3-torch python3-numpy"
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "peers: installing$need"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null; }; then
      echo "peers: could not install$need; run: apt-get update && apt-get install -y$need" >&2
      exit 2
    fi
  else
    echo "peers: missing$need; run: sudo apt-get update && sudo apt-get install -y$need" >&2
    exit 2
  fi
fi

if [ -f "$stamp" ]; then
  echo "peers: llama.cpp $(cat "$dir/llama.commit") already built in $dir (rm $stamp to rebuild); PyTorch $("$py" -c 'import torch; print(torch.__version__)')"
  exit 0
fi

mkdir -p "$dir"
tgz="$dir/$pkg-$version.tgz"

# ---- fetch and verify ---------------------------------------------------
# npm's integrity string of a file: "sha512-" + base64 of the binary digest
sri() { printf "sha512-%s" "$(printf "$(sha512sum "$1" | cut -d' ' -f1 | sed 's/../\\x&/g')" | base64 -w0)"; }
if [ ! -f "$tgz" ] || [ "$(sri "$tgz")" != "$integrity" ]; then
  rm -f "$tgz"
  echo "peers: npm pack $pkg@$version"
  if ! (cd "$dir" && npm pack --silent "$pkg@$version" >npm-pack.log 2>&1); then
    echo "peers: cannot fetch $pkg@$version from the npm registry (no network? see $dir/npm-pack.log); run: make peers once the registry is reachable" >&2
    exit 2
  fi
fi
got=$(sri "$tgz")
if [ "$got" != "$integrity" ]; then
  rm -f "$tgz"
  echo "peers: checksum mismatch for $pkg@$version: expected $integrity, got $got; build stopped" >&2
  exit 1
fi
echo "peers: $pkg@$version integrity ok ($integrity)"

# ---- source -------------------------------------------------------------
src="$dir/llama.cpp"
rm -rf "$dir/pkg" "$src"
mkdir -p "$dir/pkg"
tar -xzf "$tgz" -C "$dir/pkg" package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json
git clone --quiet "$dir/pkg/package/llama/gitRelease.bundle" "$src"
commit=$(git -C "$src" rev-parse HEAD)
release=$(sed -n 's/.*"release": *"\([^"]*\)".*/\1/p' "$dir/pkg/package/llama/binariesGithubRelease.json")
echo "peers: llama.cpp commit $commit (node-llama-cpp $version, release ${release:-unknown})"

# ---- build --------------------------------------------------------------
# Static libraries, native ISA (kvlab builds with -march=native too), OpenMP
# threads (as kvlab), no network code, no tests, examples or server.
bld="$dir/build"
cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON >"$dir/cmake.log" 2>&1 || {
  echo "peers: cmake configure failed (see $dir/cmake.log)" >&2; exit 1; }
ninja -C "$bld" -j "$jobs" ggml-cpu llama llama-bench llama-convert-llama2c-to-ggml \
  >"$dir/ninja.log" 2>&1 || { echo "peers: build failed (see $dir/ninja.log)" >&2; exit 1; }

echo "$commit" >"$dir/llama.commit"
echo "$version" >"$dir/npm.version"
echo "${release:-unknown}" >"$dir/release"
touch "$stamp"
echo "peers: built llama.cpp $commit in $bld"
