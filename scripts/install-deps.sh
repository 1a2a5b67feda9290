#!/usr/bin/env bash
# Installs what the build and the tests need, if missing: clang and libclang (RocksDB's bindings), iproute2
# (the line-topology test builds network namespaces with `ip`) and the
# S3-compatible test server (`moto` in server mode, from PyPI) that the S3 tests of regolith-rpc start, and
# the wallet library `nekoton` (PyPI) that the account API's tests drive.
set -euo pipefail

install_s3_test_server() {
  local python="${REGOLITH_PYTHON:-python3}"
  if "$python" -c 'import moto.server, flask, werkzeug' >/dev/null 2>&1; then
    return 0
  fi
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    apt_install python3-pip
  fi
  echo "installing the S3 test server: moto[server] (PyPI)" >&2
  "$python" -m pip install --quiet 'moto[server]' 2>/dev/null \
    || "$python" -m pip install --quiet --break-system-packages 'moto[server]'
  "$python" -c 'import moto.server' # fail loudly if it is still missing
}

install_nekoton() {
  local python="${REGOLITH_PYTHON:-python3}"
  if "$python" -c 'import nekoton' >/dev/null 2>&1; then
    return 0
  fi
  echo "installing the wallet library: nekoton (PyPI)" >&2
  "$python" -m pip install --quiet nekoton 2>/dev/null \
    || "$python" -m pip install --quiet --break-system-packages nekoton
  "$python" -c 'import nekoton' # fail loudly if it is still missing
}

apt_install() {
  local sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq "$@"
}

missing=()
for pkg in clang libclang-dev iproute2; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing system packages: ${missing[*]}" >&2
  apt_install "${missing[@]}"
fi

install_s3_test_server
install_nekoton
