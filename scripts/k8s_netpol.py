"""NetworkPolicy checks of scripts/k8s_check.py: under a namespace-wide default deny, every
Deployment, StatefulSet and DaemonSet is selected by policies that allow exactly the traffic it needs.

Each workload's allowed traffic is computed from the rendered policies as a set of
(peer, port) pairs per direction, where a peer is another workload of the render (by role:
redis, learner, actor, rrm, env-worker, weights-cache), `ns:keda` (KEDA's namespace), `ns:monitoring` (any
namespace labelled reagent.dev/monitoring=true), `dns` (kube-dns in any namespace) or an ipBlock
CIDR, and compared with NEEDS. A rule that allows every port or every peer is an error.
"""

from __future__ import annotations

MONITORING_LABEL = ("reagent.dev/monitoring", "true")

# What each workload needs, and nothing more (SECURITY.md, cluster/k8s/base/network-policy.yaml).
NEEDS = {
    "redis": {"ingress": {("learner", 6379), ("actor", 6379), ("rrm", 6379), ("ns:keda", 6379)},
              "egress": set()},
    "learner": {"ingress": {("ns:monitoring", 9090)}, "egress": {("redis", 6379), ("dns", 53)}},
    "actor": {"ingress": {("ns:monitoring", 9090)},
              "egress": {("redis", 6379), ("env-worker", 7070), ("dns", 53)}},
    "rrm": {"ingress": {("ns:monitoring", 9090)}, "egress": {("redis", 6379), ("dns", 53)}},
    "env-worker": {"ingress": {("actor", 7070), ("ns:monitoring", 9090)}, "egress": set()},
    # components/weights-cache: a Redis replica per node that actors read weights from.
    "weights-cache": {"ingress": {("actor", 6379)}, "egress": {("redis", 6379), ("dns", 53)}},
}
# What other workloads need besides NEEDS when a workload of the key's role is deployed.
NEEDS_WITH = {
    "weights-cache": {"actor": {"egress": {("weights-cache", 6379)}},
                      "redis": {"ingress": {("weights-cache", 6379)}}},
}
# Without the in-cluster Redis (components/external-redis), the roles reach it by address.
EXTERNAL_REDIS = ("0.0.0.0/0", 6379)


def selects(selector: dict | None, labels: dict) -> bool:
    """A LabelSelector (matchLabels, matchExpressions In/NotIn/Exists) against labels; `{}`
    selects everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def role_of(w: dict) -> str:
    """A workload's role: `reagent <role>`'s first argument, weights-cache, or redis."""
    spec = ((w["spec"].get("template") or {}).get("spec") or {})
    if pod_labels(w).get("app.kubernetes.io/component") == "weights-cache":
        return "weights-cache"
    for c in spec.get("containers") or []:
        args = [str(a) for a in c.get("args") or []]
        if args and args[0] in NEEDS:
            return args[0]
        if "redis" in str(c.get("image", "")):
            return "redis"
    return w["metadata"]["name"]


def pod_labels(w: dict) -> dict:
    return ((w["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}


def peers(peer: dict, roles: dict[str, dict]) -> tuple[set[str], str | None]:
    """The peers one `from`/`to` entry names, and an error for one that is too broad."""
    ns_sel, pod_sel, block = peer.get("namespaceSelector"), peer.get("podSelector"), peer.get("ipBlock")
    if block is not None:
        return {block.get("cidr", "?")}, None
    if ns_sel is None:
        found = {role for role, labels in roles.items() if selects(pod_sel, labels)}
        if pod_sel in ({}, None) or not pod_sel.get("matchLabels") and not pod_sel.get("matchExpressions"):
            return found, "a podSelector that selects every pod of the namespace"
        return found, None
    ns_labels = ns_sel.get("matchLabels") or {}
    if (pod_sel or {}).get("matchLabels", {}).get("k8s-app") == "kube-dns":
        return {"dns"}, None
    if ns_labels.get("kubernetes.io/metadata.name") == "keda" and not pod_sel:
        return {"ns:keda"}, None
    if ns_labels.get(MONITORING_LABEL[0]) == MONITORING_LABEL[1] and not pod_sel:
        return {"ns:monitoring"}, None
    return set(), f"an unrecognised namespaceSelector {ns_sel} (podSelector {pod_sel})"


def allowed(policies: list[dict], direction: str, roles: dict[str, dict]) -> tuple[set, list[str]]:
    """The (peer, port) pairs the `direction` rules of `policies` allow, and what is too broad."""
    pairs: set = set()
    problems = []
    key, side = ("ingress", "from") if direction == "ingress" else ("egress", "to")
    for p in policies:
        name = p["metadata"]["name"]
        for i, rule in enumerate((p.get("spec") or {}).get(key) or []):
            ports = [pt.get("port") for pt in rule.get("ports") or []]
            if not ports:
                problems.append(f"NetworkPolicy/{name}: {key}[{i}] allows every port")
            if not rule.get(side):
                problems.append(f"NetworkPolicy/{name}: {key}[{i}] allows every peer")
            for peer in rule.get(side) or []:
                found, problem = peers(peer, roles)
                if problem:
                    problems.append(f"NetworkPolicy/{name}: {key}[{i}]: {problem}")
                pairs |= {(f, port) for f in found for port in ports}
    return pairs, problems


def check(by_kind: dict[str, dict[str, dict]], workloads: dict) -> list[str]:
    errors: list[str] = []
    policies = list(by_kind.get("NetworkPolicy", {}).values())
    deny = [p for p in policies if (p["spec"].get("podSelector") or {}) == {}
            and set(p["spec"].get("policyTypes") or []) == {"Ingress", "Egress"}
            and not p["spec"].get("ingress") and not p["spec"].get("egress")]
    if not deny:
        errors.append("no default-deny NetworkPolicy (podSelector {}, policyTypes Ingress and Egress, no rules)")
    roles = {role_of(w): pod_labels(w) for w in workloads.values()}
    for (kind, name), w in workloads.items():
        role = role_of(w)
        need = NEEDS.get(role)
        if need is None:
            errors.append(f"{kind}/{name}: no network needs are known for it (scripts/k8s_netpol.py NEEDS)")
            continue
        labels = pod_labels(w)
        mine = [p for p in policies if p not in deny and selects(p["spec"].get("podSelector"), labels)]
        if not mine:
            errors.append(f"{kind}/{name}: selected by no NetworkPolicy besides the default deny")
        for direction in ("ingress", "egress"):
            typed = [p for p in mine if direction.capitalize() in (p["spec"].get("policyTypes") or [])]
            got, problems = allowed(typed, direction, roles)
            errors.extend(problems)
            want = set(need[direction])
            for present, extra in NEEDS_WITH.items():
                if present in roles:
                    want |= extra.get(role, {}).get(direction, set())
            if "redis" not in roles and ("redis", 6379) in want:
                want = (want - {("redis", 6379)}) | {EXTERNAL_REDIS}
            if got != want:
                missing = ", ".join(f"{p}:{n}" for p, n in sorted(want - got, key=str)) or "nothing"
                extra = ", ".join(f"{p}:{n}" for p, n in sorted(got - want, key=str)) or "nothing"
                errors.append(f"{kind}/{name} ({role}): {direction} lacks {missing}; allows more: {extra}")
    return errors
