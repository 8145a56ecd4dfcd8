#!/usr/bin/env bash
# Sets up the evaluator's OS sandbox where it can (issue 26): bubblewrap, and util-linux's setpriv with which a
# root-started sandbox drops to uid 65534. Only as root with apt, quietly; never fails the run that called it
# (`make run`): without bubblewrap, shipped templates still run with a warning, while LLM-written or
# user-supplied candidates are refused unless --unsafe-run-unsandboxed. `warpforge doctor` says how otherwise.
have() { command -v "$1" >/dev/null 2>&1; }
if have bwrap && { [ "$(id -u)" != 0 ] || have setpriv; }; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && have apt-get; then
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(bubblewrap util-linux)
  apt-get install -y -q "${pkgs[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${pkgs[@]}" >/dev/null 2>&1; } \
    || true
fi
if have bwrap; then
  echo "sandbox: bubblewrap $(bwrap --version 2>/dev/null | awk '{print $2}') installed; candidates run isolated"
else
  echo "sandbox: bubblewrap is not installed and could not be here (needs root and apt); see: warpforge doctor"
fi
exit 0
