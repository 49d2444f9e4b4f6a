#!/usr/bin/env bash
# Can the hosts of the multi-host test (reagent/tests/suite/multihost.rs) be made on this machine?
# Tries what reagent/tests/suite/multihost/netns.rs needs — root, the `ip` command, a network
# namespace, a veth pair with one end moved into it, a bridge inside it — and undoes it.
# Exit 0 when they can; otherwise prints the reason on stdout and exits 1. `make unit` runs the
# (ignored) multi-host test only where this passes, or always when REAGENT_REQUIRE_NETNS=1.
set -u
if [ "$(id -u)" -ne 0 ]; then
  echo "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); not running as root"
  exit 1
fi
if ! command -v ip >/dev/null 2>&1; then
  echo "the ip command (Debian package iproute2) is not available"
  exit 1
fi
# The names follow netns.rs (rgmh<pid>…), whose clean-up removes them if this is killed midway.
ns="rgmh$$-probe" a="rgmh$$pa" b="rgmh$$pb"
err="$({ ip netns add "$ns" && ip link add "$a" type veth peer name "$b" && ip link set "$b" netns "$ns" &&
  ip -n "$ns" link add br0 type bridge; } 2>&1)"
rc=$?
ip link del "$a" >/dev/null 2>&1
ip netns del "$ns" >/dev/null 2>&1
if [ "$rc" -ne 0 ]; then
  echo "cannot create network namespaces and veth pairs here: ${err:-ip failed}"
  exit 1
fi
