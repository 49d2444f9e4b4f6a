#!/usr/bin/env python3
"""Checks the Kubernetes deployment under cluster/k8s; run through scripts/k8s_check.sh.

For every overlay, and every overlay combined with each optional component it does not already
use (components that cannot go together, like keda and hpa, are not combined):

  1. it renders with kustomize (`kubectl kustomize`);
  2. every object validates, strictly (no unknown fields), against the Kubernetes OpenAPI schemas
     of the oldest and newest Kubernetes versions we support (kubernetes-validate); kinds with no
     schema there (KEDA's ScaledObject and TriggerAuthentication, the Prometheus Operator's
     ServiceMonitor) get their apiVersion, kind and required fields checked here instead, and any
     other unknown kind is an error;
  3. references hold: Services, PodDisruptionBudgets and ServiceMonitors select something,
     autoscalers target an existing Deployment (and never two autoscalers the same one), named
     ports, ConfigMaps, Secrets and their keys exist, every namespaced object is in the namespace;
  4. every Reagent role is deployable as the role commands expect: `reagent <role> --config
     <file>` with the file mounted from a ConfigMap, liveness /healthz and readiness /readyz on
     the port of metrics.listen, resource requests, a Redis URL, run.dir on a volume (a persistent
     one for the learner), a PodDisruptionBudget and a graceful termination period for workers;
  5. every role's configuration, its TOML job file with its REAGENT__SECTION__KEY environment
     variables, loads in `reagent config show` (the binary's own loader: an unknown key or a value
     the code would refuse fails here, naming the key), and the checks of 4 read what it resolved;
  6. KEDA's redis-streams triggers name the run's streams (reagent:{<run.id>}:rollouts|scored)
     and the consumer group that reads them;
  7. Redis security: each role authenticates as its own ACL user with a password from a Secret
     (none in redis.url, none for env-workers, the placeholder `change-me` only where the job
     allows it), no password on redis-server's command line, and every Deployment/StatefulSet/DaemonSet
     is selected by NetworkPolicies that allow exactly the traffic it needs, under a
     namespace-wide default deny (scripts/k8s_netpol.py).

Once: the Grafana dashboard (cluster/k8s/grafana/reagent.json) is valid JSON and names only
metrics that the Rust sources define.

Prints one line per variant and ends with "k8s check: N passed, N failed"; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import k8s_netpol

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "cluster" / "k8s"
# The binary whose configuration loader judges every role's job file and environment.
REAGENT = os.environ.get("REAGENT_BIN") or str(ROOT / "target" / "debug" / "reagent")
DASHBOARD = K8S / "grafana" / "reagent.json"
WORK = ROOT / "target" / "k8s-check"

# The oldest Kubernetes the manifests are meant for (PodDisruptionBudget policy/v1, HPA
# autoscaling/v2, StatefulSet PVC retention all there), and the newest with bundled schemas.
K8S_VERSIONS = ("1.29.0", "latest")

ROLES = ("learner", "actor", "rrm", "env-worker")
# Redis stream short name -> the consumer group that reads it, and the role that forms that group.
STREAM_GROUPS = {"rollouts": ("rrm", "rrm"), "scored": ("learner", "learner")}
# Components that must not be combined (two autoscalers on one Deployment fight).
CONFLICTS = ({"keda", "hpa"},)
CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PersistentVolume",
    "StorageClass", "PriorityClass", "IngressClass", "RuntimeClass", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "ClusterTriggerAuthentication",
}


# --------------------------------------------------------------------------------------------
# Rendering


@dataclass
class Variant:
    name: str
    path: Path          # directory with the kustomization to build
    namespace: str | None


def kustomization(path: Path) -> dict:
    import yaml

    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if (path / name).is_file():
            return yaml.safe_load((path / name).read_text()) or {}
    raise FileNotFoundError(f"no kustomization in {path}")


def component_dirs() -> dict[str, Path]:
    """Every Component under cluster/k8s, by short name (its directory's name)."""
    found = {}
    for k in sorted(K8S.rglob("kustomization.yaml")):
        if "overlays" in k.parts or k.parent == K8S / "base":
            continue
        if kustomization(k.parent).get("kind") == "Component":
            found[k.parent.name] = k.parent
    return found


def components_used(path: Path) -> set[Path]:
    """The components a kustomization uses, its own and those of the kustomizations it builds on."""
    k = kustomization(path)
    used = {(path / c).resolve() for c in k.get("components") or []}
    for res in k.get("resources") or []:
        sub = (path / res).resolve()
        if sub.is_dir():
            used |= components_used(sub)
    return used


def variants() -> list[Variant]:
    overlays = sorted(p.parent for p in (K8S / "overlays").glob("*/kustomization.yaml"))
    components = component_dirs()
    out: list[Variant] = []
    WORK.mkdir(parents=True, exist_ok=True)
    for overlay in overlays:
        k = kustomization(overlay)
        ns = k.get("namespace")
        used = components_used(overlay)
        used_names = {p.name for p in used}
        out.append(Variant(f"overlays/{overlay.name}", overlay, ns))
        for cname, cdir in components.items():
            if cdir.resolve() in used:
                continue
            if any(cname in pair and (pair - {cname}) & used_names for pair in CONFLICTS):
                continue
            vdir = WORK / f"{overlay.name}+{cname}"
            vdir.mkdir(parents=True, exist_ok=True)
            lines = [
                "# Generated by scripts/k8s_check.py: an overlay combined with one more component.",
                "apiVersion: kustomize.config.k8s.io/v1beta1",
                "kind: Kustomization",
            ]
            if ns:
                lines.append(f"namespace: {ns}")
            lines += [
                "resources:",
                f"  - {os.path.relpath(overlay, vdir)}",
                "components:",
                f"  - {os.path.relpath(cdir, vdir)}",
            ]
            (vdir / "kustomization.yaml").write_text("\n".join(lines) + "\n")
            rel = cdir.relative_to(K8S)
            out.append(Variant(f"overlays/{overlay.name} + {rel}", vdir, ns))
    return out


def render(kustomize: list[str], path: Path) -> list[dict]:
    import yaml

    proc = subprocess.run([*kustomize, str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"kustomize failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


# --------------------------------------------------------------------------------------------
# Schema validation


def schema_validator():
    import kubernetes_validate
    from kubernetes_validate import utils

    # Schema files are read once, not once per object.
    utils.schema_contents = functools.lru_cache(maxsize=None)(utils.schema_contents)
    versions = [utils.latest_version() if v == "latest" else v for v in K8S_VERSIONS]

    @functools.lru_cache(maxsize=None)
    def validate(doc_json: str, version: str) -> str | None:
        """None when valid; "no-schema" when there is no schema for the kind; else the error."""
        doc = json.loads(doc_json)
        try:
            kubernetes_validate.validate(doc, version, strict=True)
            return None
        except utils.SchemaNotFoundError:
            return "no-schema"
        except utils.ValidationError as e:
            where = "/".join(str(p) for p in e.path) or "(top)"
            return f"{where}: {e.message}"

    return validate, versions


# --------------------------------------------------------------------------------------------
# Custom resources: apiVersion, kind and the fields their controllers require.


def check_scaledobject(o: dict, err) -> None:
    spec = o.get("spec") or {}
    if o.get("apiVersion") != "keda.sh/v1alpha1":
        err(f"apiVersion {o.get('apiVersion')!r}: KEDA's ScaledObject is keda.sh/v1alpha1")
    if not (spec.get("scaleTargetRef") or {}).get("name"):
        err("spec.scaleTargetRef.name is required")
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        err("spec.triggers must be a non-empty list")
        triggers = []
    lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
    if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi):
        err(f"minReplicaCount {lo!r} / maxReplicaCount {hi!r}: need integers 0 <= min <= max")
    for i, t in enumerate(triggers):
        if not isinstance(t, dict) or not t.get("type"):
            err(f"triggers[{i}].type is required")
            continue
        md = t.get("metadata")
        if not isinstance(md, dict) or not all(isinstance(v, str) for v in md.values()):
            err(f"triggers[{i}].metadata must map names to strings")
            md = {}
        if t["type"] == "redis-streams":
            if not md.get("stream"):
                err(f"triggers[{i}]: redis-streams needs metadata.stream")
            modes = [k for k in ("pendingEntriesCount", "lagCount", "streamLength") if k in md]
            if not modes:
                err(f"triggers[{i}]: redis-streams needs pendingEntriesCount, lagCount or streamLength")
            for k in modes:
                if not re.fullmatch(r"[1-9][0-9]*", md[k]):
                    err(f"triggers[{i}].metadata.{k} {md[k]!r}: expected a positive integer string")
            if ("pendingEntriesCount" in md or "lagCount" in md) and not md.get("consumerGroup"):
                err(f"triggers[{i}]: pendingEntriesCount and lagCount need metadata.consumerGroup")
            if not (md.get("address") or md.get("host") or md.get("addressFromEnv") or md.get("hostFromEnv")
                    or (t.get("authenticationRef") or {}).get("name")):
                err(f"triggers[{i}]: no Redis address (metadata.address or an authenticationRef)")
        elif t["type"] in ("cpu", "memory"):
            if t.get("metricType") not in ("Utilization", "AverageValue"):
                err(f"triggers[{i}]: {t['type']} needs metricType Utilization or AverageValue")
            if not re.fullmatch(r"[0-9]+", md.get("value", "")):
                err(f"triggers[{i}]: {t['type']} needs metadata.value as an integer string")
        else:
            err(f"triggers[{i}]: trigger type {t['type']!r} is not one this check knows")


def check_triggerauthentication(o: dict, err) -> None:
    if o.get("apiVersion") != "keda.sh/v1alpha1":
        err(f"apiVersion {o.get('apiVersion')!r}: KEDA's TriggerAuthentication is keda.sh/v1alpha1")
    refs = (o.get("spec") or {}).get("secretTargetRef")
    if not isinstance(refs, list) or not refs:
        err("spec.secretTargetRef must be a non-empty list")
        return
    for i, r in enumerate(refs):
        for k in ("parameter", "name", "key"):
            if not (isinstance(r, dict) and isinstance(r.get(k), str) and r[k]):
                err(f"secretTargetRef[{i}].{k} is required")


def check_servicemonitor(o: dict, err) -> None:
    if o.get("apiVersion") != "monitoring.coreos.com/v1":
        err(f"apiVersion {o.get('apiVersion')!r}: ServiceMonitor is monitoring.coreos.com/v1")
    spec = o.get("spec") or {}
    if not isinstance(spec.get("selector"), dict):
        err("spec.selector is required")
    eps = spec.get("endpoints")
    if not isinstance(eps, list) or not eps:
        err("spec.endpoints must be a non-empty list")
        return
    for i, e in enumerate(eps):
        if not (isinstance(e, dict) and (e.get("port") or e.get("targetPort"))):
            err(f"endpoints[{i}] needs port (a Service port name) or targetPort")


CUSTOM = {
    "ScaledObject": check_scaledobject,
    "TriggerAuthentication": check_triggerauthentication,
    "ServiceMonitor": check_servicemonitor,
}


# --------------------------------------------------------------------------------------------
# Configuration: what a role resolves, from the Rust loader itself


def flatten(table: dict, prefix: tuple = ()) -> dict[tuple, object]:
    out = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(flatten(v, prefix + (k,)))
        else:
            out[prefix + (k,)] = v
    return out


@functools.lru_cache(maxsize=None)
def resolve_config(text: str, env: tuple[tuple[str, str], ...]) -> tuple[dict[tuple, object] | None, str]:
    """The configuration a role container resolves from its job file and its REAGENT__ variables,
    as `reagent config show` prints it (the binary's own loader: unknown keys and bad values are
    refused by the code that will read them). Returns (flattened keys, "") or (None, the error)."""
    WORK.mkdir(parents=True, exist_ok=True)
    job = WORK / f"job-{os.getpid()}.toml"
    job.write_text(text)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("REAGENT__")}
    child_env.update(dict(env))
    try:
        p = subprocess.run([REAGENT, "--config", str(job), "config", "show"], env=child_env,
                           capture_output=True, text=True, timeout=60)
    finally:
        job.unlink(missing_ok=True)
    if p.returncode != 0:
        said = " ".join(l.strip() for l in p.stderr.splitlines() if l.strip()).removeprefix("error: ")
        return None, said or f"`reagent config show` exited {p.returncode}"
    return flatten(tomllib.loads(p.stdout)), ""


# --------------------------------------------------------------------------------------------
# One rendered variant


def labels_match(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def decode(o: dict) -> dict[str, str]:
    """The string data of a ConfigMap or Secret."""
    data = dict(o.get("data") or {})
    if o["kind"] == "Secret":
        data = {k: base64.b64decode(v).decode() for k, v in data.items()}
        data.update(o.get("stringData") or {})
    return data


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion ($$ escapes)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def is_parent(parent: str, path: str) -> bool:
    p, c = PurePosixPath(parent), PurePosixPath(path)
    return p == c or p in c.parents


def arg_after(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args[:-1] else None


@dataclass
class Result:
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    schema_checked: int = 0
    custom_checked: int = 0


class Bundle:
    """One variant's rendered objects, indexed, with the look-ups every check shares."""

    def __init__(self, objs: list[dict]):
        self.objs = objs
        self.by_kind: dict[str, dict[str, dict]] = {}
        for o in objs:
            self.by_kind.setdefault(o.get("kind", "?"), {})[(o.get("metadata") or {}).get("name", "?")] = o
        self.workloads = {(kind, n): o for kind in ("Deployment", "StatefulSet", "DaemonSet")
                          for n, o in self.by_kind.get(kind, {}).items()}
        namespaces = list(self.by_kind.get("Namespace", {}))
        self.namespaces = namespaces
        self.ns = namespaces[0] if namespaces else None

    def get(self, kind: str, name: str) -> dict | None:
        return self.by_kind.get(kind, {}).get(name)

    def of_kind(self, kind: str) -> dict[str, dict]:
        return self.by_kind.get(kind, {})

    @staticmethod
    def pod_labels(w: dict) -> dict:
        return ((w["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}

    @staticmethod
    def pod_spec(w: dict) -> dict:
        return (w["spec"].get("template") or {}).get("spec") or {}

    @classmethod
    def container_ports(cls, w: dict) -> dict[str, int]:
        return {p["name"]: p["containerPort"] for c in (cls.pod_spec(w).get("containers") or [])
                for p in (c.get("ports") or []) if p.get("name")}

    def in_cluster(self, host: str, port: int) -> str | None:
        """For an address inside the cluster (a Service name, short or .svc), what is wrong with
        it ("" when nothing); None for an address outside."""
        labels = host.split(".")
        if not (len(labels) == 1 or host.endswith((".svc", ".svc.cluster.local"))):
            return None
        svc_ns = labels[1] if len(labels) > 1 else self.ns
        svc = self.get("Service", labels[0])
        if svc is None or svc_ns != self.ns:
            return f"{host} is no Service of this deployment (namespace {self.ns})"
        if port not in {p["port"] for p in (svc["spec"].get("ports") or [])}:
            return f"port {port} is not a port of Service {labels[0]}"
        return ""

    def role_containers(self):
        """(kind, name, workload, container, args, role) of every container running a role."""
        for (kind, name), w in self.workloads.items():
            for c in (self.pod_spec(w).get("containers") or []):
                args = [str(a) for a in (c.get("args") or [])]
                if args and args[0] in ROLES:
                    yield kind, name, w, c, args, args[0]


# 2. Schemas, or the custom checks.
def check_schemas(b: Bundle, r: Result, validate, versions) -> None:
    for o in b.objs:
        ident = f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
        doc = json.dumps(o, sort_keys=True)
        results = [validate(doc, v) for v in versions]
        if all(x == "no-schema" for x in results):
            check = CUSTOM.get(o.get("kind"))
            if check is None:
                r.errors.append(f"{ident}: no Kubernetes schema for {o.get('apiVersion')} {o.get('kind')} "
                                "and no custom check in scripts/k8s_check.py")
            else:
                check(o, lambda m, ident=ident: r.errors.append(f"{ident}: {m}"))
                r.custom_checked += 1
            continue
        r.schema_checked += 1
        for v, x in zip(versions, results):
            if x == "no-schema":
                r.errors.append(f"{ident}: {o.get('apiVersion')} is not served by Kubernetes {v}")
            elif x:
                r.errors.append(f"{ident}: invalid for Kubernetes {v}: {x}")


# 3. References.
def check_namespace(b: Bundle, r: Result) -> None:
    if len(b.namespaces) != 1:
        r.errors.append(f"expected exactly one Namespace, found {b.namespaces}")
    for o in b.objs:
        if o.get("kind") in CLUSTER_SCOPED:
            continue
        got = (o.get("metadata") or {}).get("namespace")
        if got != b.ns:
            r.errors.append(f"{o['kind']}/{o['metadata'].get('name')}: namespace {got!r}, expected {b.ns!r} "
                            "(set `namespace:` in the overlay)")


def check_container_references(b: Bundle, r: Result, ident: str, c: dict, volumes: dict, claims: set) -> None:
    cid = f"{ident} container {c['name']}"
    ports = {p["name"]: p["containerPort"] for p in (c.get("ports") or []) if p.get("name")}
    for m in (c.get("volumeMounts") or []):
        if m["name"] not in volumes and m["name"] not in claims:
            r.errors.append(f"{cid}: mounts {m['name']}, which is no volume of the pod")
    for ef in (c.get("envFrom") or []):
        for kindref, k in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            if kindref in ef and not b.get(k, ef[kindref]["name"]) and not ef[kindref].get("optional"):
                r.errors.append(f"{cid}: envFrom names a missing {k} {ef[kindref]['name']}")
    for e in (c.get("env") or []):
        vf = e.get("valueFrom") or {}
        for kindref, k in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
            if kindref in vf:
                ref = vf[kindref]
                obj = b.get(k, ref["name"])
                if (obj is None or ref["key"] not in decode(obj)) and not ref.get("optional"):
                    r.errors.append(f"{cid}: env {e['name']} needs key {ref['key']} of {k} {ref['name']}")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
        if isinstance(port, str) and port not in ports:
            r.errors.append(f"{cid}: {probe} uses port {port!r}, which the container does not name")


def check_workload_references(b: Bundle, r: Result) -> None:
    for (kind, name), w in b.workloads.items():
        ident = f"{kind}/{name}"
        sel = (w["spec"].get("selector") or {}).get("matchLabels") or {}
        if not labels_match(sel, b.pod_labels(w)):
            r.errors.append(f"{ident}: selector {sel} does not match its pod template's labels")
        spec = b.pod_spec(w)
        volumes = {v["name"]: v for v in (spec.get("volumes") or [])}
        claims = {t["metadata"]["name"] for t in (w["spec"].get("volumeClaimTemplates") or [])}
        for v in volumes.values():
            if "configMap" in v and not b.get("ConfigMap", v["configMap"]["name"]):
                r.errors.append(f"{ident}: volume {v['name']} names a missing ConfigMap {v['configMap']['name']}")
            if "secret" in v and not b.get("Secret", v["secret"]["secretName"]):
                r.errors.append(f"{ident}: volume {v['name']} names a missing Secret {v['secret']['secretName']}")
        if kind == "StatefulSet" and not b.get("Service", w["spec"].get("serviceName", "")):
            r.errors.append(f"{ident}: serviceName {w['spec'].get('serviceName')!r} is not a Service here")
        for c in (spec.get("containers") or []):
            check_container_references(b, r, ident, c, volumes, claims)


def check_gpu_placement(b: Bundle, r: Result) -> None:
    """A pod that requests an NVIDIA GPU runs the CUDA image ("cuda" in its name or tag) under a
    RuntimeClass that mounts the driver; a pod that requests none runs no CUDA image (init
    containers included): the 3 GB of CUDA libraries are for the learner alone."""
    for (kind, name), w in b.workloads.items():
        spec = b.pod_spec(w)
        containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
        gpu = any("nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {}) or
                  "nvidia.com/gpu" in ((c.get("resources") or {}).get("requests") or {}) for c in containers)
        for c in containers:
            cuda = "cuda" in str(c.get("image", "")).rsplit("/", 1)[-1]
            if gpu and "nvidia.com/gpu" in str(c.get("resources")) and not cuda:
                r.errors.append(f"{kind}/{name}: container {c['name']} requests a GPU but runs {c.get('image')}, not the CUDA image")
            if not gpu and cuda:
                r.errors.append(f"{kind}/{name}: container {c['name']} runs the CUDA image {c.get('image')} without a GPU")
        if gpu and not spec.get("runtimeClassName"):
            r.errors.append(f"{kind}/{name}: requests a GPU but sets no runtimeClassName (the NVIDIA runtime mounts the driver)")


def check_services(b: Bundle, r: Result) -> None:
    for name, s in b.of_kind("Service").items():
        sel = s["spec"].get("selector") or {}
        matched = [w for w in b.workloads.values() if labels_match(sel, b.pod_labels(w))]
        if not matched:
            r.errors.append(f"Service/{name}: selector {sel} matches no pod template")
        for p in (s["spec"].get("ports") or []):
            tp = p.get("targetPort")
            if isinstance(tp, str) and matched and not any(tp in b.container_ports(w) for w in matched):
                r.errors.append(f"Service/{name}: targetPort {tp!r} is named by none of the pods it selects")


def check_disruption_budgets(b: Bundle, r: Result) -> None:
    for name, p in b.of_kind("PodDisruptionBudget").items():
        sel = (p["spec"].get("selector") or {}).get("matchLabels") or {}
        if not any(labels_match(sel, b.pod_labels(w)) for w in b.workloads.values()):
            r.errors.append(f"PodDisruptionBudget/{name}: selector {sel} matches no pod template")


def check_autoscalers(b: Bundle, r: Result) -> None:
    autoscaled: dict[str, list[str]] = {}
    for name, h in b.of_kind("HorizontalPodAutoscaler").items():
        ref = h["spec"]["scaleTargetRef"]
        if (ref.get("kind"), ref.get("name")) not in b.workloads:
            r.errors.append(f"HorizontalPodAutoscaler/{name}: target {ref.get('kind')}/{ref.get('name')} is not here")
        autoscaled.setdefault(ref.get("name"), []).append(f"HorizontalPodAutoscaler/{name}")
    for name, so in b.of_kind("ScaledObject").items():
        ref = (so.get("spec") or {}).get("scaleTargetRef") or {}
        if (ref.get("kind") or "Deployment", ref.get("name")) not in b.workloads:
            r.errors.append(f"ScaledObject/{name}: target {ref.get('kind', 'Deployment')}/{ref.get('name')} is not here")
        autoscaled.setdefault(ref.get("name"), []).append(f"ScaledObject/{name}")
        for i, t in enumerate(so["spec"].get("triggers") or []):
            auth = (t.get("authenticationRef") or {}).get("name")
            if auth and not b.get("TriggerAuthentication", auth):
                r.errors.append(f"ScaledObject/{name}: triggers[{i}] names a missing TriggerAuthentication {auth}")
    for target, scalers in autoscaled.items():
        if len(scalers) > 1:
            r.errors.append(f"{target} has more than one autoscaler: {', '.join(scalers)}")
    for name, ta in b.of_kind("TriggerAuthentication").items():
        for ref in (ta.get("spec") or {}).get("secretTargetRef") or []:
            secret = b.get("Secret", ref.get("name", ""))
            if secret is None or ref.get("key") not in decode(secret):
                r.errors.append(f"TriggerAuthentication/{name}: needs key {ref.get('key')} of Secret {ref.get('name')}")


def check_service_monitors(b: Bundle, r: Result) -> None:
    for name, sm in b.of_kind("ServiceMonitor").items():
        sel = ((sm.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        svcs = [s for s in b.of_kind("Service").values()
                if labels_match(sel, (s.get("metadata") or {}).get("labels") or {})]
        if not svcs:
            r.errors.append(f"ServiceMonitor/{name}: selector {sel} matches no Service")
        for e in ((sm.get("spec") or {}).get("endpoints") or []):
            if e.get("port") and svcs and not any(e["port"] in {p.get("name") for p in s["spec"]["ports"]} for s in svcs):
                r.errors.append(f"ServiceMonitor/{name}: port {e['port']!r} is named by none of its Services")


# 4 and 5. Reagent roles and their configuration.
def job_file(b: Bundle, w: dict, c: dict, args: list[str], err) -> tuple[str, str] | None:
    """(where, text) of the job file a role's --config names, from its ConfigMap volume."""
    cfg_file = arg_after(args, "--config")
    if cfg_file is None:
        err("no `--config <file>` argument")
        return None
    vols = {v["name"]: v for v in (b.pod_spec(w).get("volumes") or [])}
    cm = None
    for m in (c.get("volumeMounts") or []):
        v = vols.get(m["name"], {})
        if is_parent(m["mountPath"], cfg_file) and "configMap" in v:
            cm = b.get("ConfigMap", v["configMap"]["name"])
    if cm is None:
        err(f"--config {cfg_file} is not on a ConfigMap volume")
        return None
    key = PurePosixPath(cfg_file).name
    text = decode(cm).get(key)
    if text is None:
        err(f"ConfigMap {cm['metadata']['name']} has no key {key} for --config {cfg_file}")
        return None
    return f"ConfigMap {cm['metadata']['name']}, {key}", text


def container_env(b: Bundle, c: dict) -> dict[str, str]:
    """The container's environment: envFrom first, then env (later wins), with $(VAR) expansion;
    values the cluster fills in (Secrets it does not render) as `<from the cluster>`."""
    env: dict[str, str] = {}
    for ef in (c.get("envFrom") or []):
        for kindref, k in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            if kindref in ef and b.get(k, ef[kindref]["name"]):
                env.update({ef.get("prefix", "") + n: v for n, v in decode(b.get(k, ef[kindref]["name"])).items()})
    for e in (c.get("env") or []):
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
        else:
            vf = e.get("valueFrom") or {}
            ref = vf.get("secretKeyRef") or vf.get("configMapKeyRef")
            obj = ref and b.get("Secret" if "secretKeyRef" in vf else "ConfigMap", ref["name"])
            env[e["name"]] = decode(obj).get(ref["key"], "") if obj else "<from the cluster>"
    return env


def check_role_redis(b: Bundle, r: Result, role: str, resolved: dict, env: dict, err) -> None:
    """Each role as its own ACL user, the password from the variable redis.password_env names
    (never in the URL); env-workers have no Redis at all."""
    url = str(resolved.get(("redis", "url"), ""))
    if role == "env-worker":
        if url or any("PASSWORD" in n for n in env):
            err("an env-worker gets Redis settings or passwords: it never talks to Redis")
        return
    if not url:
        err("redis.url is empty: the role would have no Redis (set REAGENT__REDIS__URL)")
        return
    scheme, _, rest = url.partition("://")
    userinfo, _, hostpart = rest.rpartition("@")
    hm = re.fullmatch(r"([^:/]+)(?::([0-9]+))?(/.*)?", hostpart)
    if ":" in userinfo:
        err("redis.url holds a password: name its variable in redis.password_env instead")
    if scheme not in ("redis", "rediss"):
        err(f"redis.url scheme {scheme!r}: expected redis:// or rediss:// (TLS)")
    host, port = (hm.group(1), int(hm.group(2) or 6379)) if hm else ("", 0)
    if not hm:
        err(f"redis.url host part {hostpart!r} is not host[:port][/db]")
    where = b.in_cluster(host, port)
    if where is None and "<from the cluster>" not in url:
        r.notes.append(f"Redis is outside the cluster, at {host}:{port}")
    elif where:
        err(f"redis.url: {where}")
    user = str(resolved.get(("redis", "user"), ""))
    if user != role:
        err(f"redis.user is {user!r}: the {role} role authenticates as its own ACL user {role!r}")
    pw_env = str(resolved.get(("redis", "password_env"), ""))
    password = env.get(pw_env) if pw_env else None
    if password is None:
        err(f"redis.password_env {pw_env!r} names no variable of the container")
    elif password == "change-me":
        if resolved.get(("redis", "allow_placeholder_password")) is not True:
            # A template to fill, not a mistake in it: the roles refuse to start until the
            # Secret holds real passwords.
            r.notes.append("the Redis passwords are the placeholder `change-me`, which the roles "
                           "refuse outside cpu-smoke: set the reagent-redis Secret before deploying "
                           "(README.md, \"Set the Redis passwords\")")
        else:
            r.notes.append("the Redis passwords are the placeholder `change-me` (allowed by this job)")
    elif password != "<from the cluster>" and not re.fullmatch(r"[ -~]+", password):
        err("the Redis password holds a newline or a non-printable character "
            "(a newline at the end of its file?): use e.g. `openssl rand -hex 32 | tr -d '\\n'`")


def check_role_env_workers(b: Bundle, r: Result, role: str, resolved: dict, err) -> None:
    if role != "actor":
        return
    addrs = resolved.get(("actor", "env_workers"), [])
    if not addrs:
        r.notes.append("actors run their environments in-process (actor.env_workers is empty)")
    for a in addrs:
        m = re.fullmatch(r"(.+):([0-9]+)", str(a))
        problem = b.in_cluster(m.group(1), int(m.group(2))) if m else f"{a!r} is not host:port"
        if problem:
            err(f"actor.env_workers: {problem}")


def check_role_endpoint(w: dict, c: dict, resolved: dict, err) -> None:
    """metrics.listen on the container port named metrics, scraped, and the probes on it."""
    ports = {p["name"]: p["containerPort"] for p in (c.get("ports") or []) if p.get("name")}
    listen = str(resolved.get(("metrics", "listen"), ""))
    m = re.fullmatch(r"(.*):([0-9]+)", listen)
    if not m:
        err(f"metrics.listen {listen!r} is not host:port: no /metrics, /healthz, /readyz")
    else:
        lhost, lport = m.group(1).strip("[]"), int(m.group(2))
        if lhost not in ("0.0.0.0", "::"):
            err(f"metrics.listen {listen!r}: the kubelet and Prometheus cannot reach {lhost}")
        if ports.get("metrics") != lport:
            err(f"metrics.listen port {lport} is not the container port named metrics ({ports.get('metrics')})")
        ann = ((w["spec"]["template"].get("metadata") or {}).get("annotations") or {})
        if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/port") != str(lport):
            err(f"pod annotations prometheus.io/scrape \"true\" and prometheus.io/port \"{lport}\" expected")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        got = ((c.get(probe) or {}).get("httpGet") or {})
        if got.get("path") != path or got.get("port") not in ("metrics", ports.get("metrics")):
            err(f"{probe} should be httpGet {path} on the metrics port, found {got or None}")
    req = (c.get("resources") or {}).get("requests") or {}
    if not ("cpu" in req and "memory" in req):
        err("resources.requests needs cpu and memory (autoscaling on CPU needs them)")


def check_role_run_dir(w: dict, c: dict, role: str, resolved: dict, err) -> None:
    """run.dir on a volume; a persistent one for the learner's checkpoints."""
    run_dir = str(resolved.get(("run", "dir"), ""))
    mount = max((mm for mm in (c.get("volumeMounts") or []) if is_parent(mm["mountPath"], run_dir)),
                key=lambda mm: len(mm["mountPath"]), default=None)
    if not PurePosixPath(run_dir).is_absolute():
        err(f"run.dir {run_dir!r} should be an absolute path on a volume")
    elif mount is None:
        err(f"run.dir {run_dir} is on no volume (the root file system is read-only)")
    elif role == "learner":
        claims = {t["metadata"]["name"] for t in (w["spec"].get("volumeClaimTemplates") or [])}
        if mount["name"] not in claims:
            err(f"run.dir {run_dir} (checkpoints) is on volume {mount['name']}, not a persistent claim")


def check_role_lifecycle(b: Bundle, kind: str, w: dict, c: dict, args: list[str], role: str,
                         resolved: dict, err) -> None:
    """The learner: one replica that resumes; workers: a disruption budget and time to leave;
    env-workers listen on their tarpc port."""
    if role == "learner":
        if kind != "StatefulSet" or w["spec"].get("replicas", 1) != 1:
            err("the learner must be a StatefulSet of exactly one replica")
        if arg_after(args, "--resume") != "auto" and resolved.get(("learner", "resume")) != "auto":
            err("the learner should resume automatically (--resume auto / learner.resume = \"auto\")")
    else:
        if kind == "Deployment" and not any(
                labels_match((p["spec"].get("selector") or {}).get("matchLabels") or {}, b.pod_labels(w))
                for p in b.of_kind("PodDisruptionBudget").values()):
            err("no PodDisruptionBudget covers it")
        grace = b.pod_spec(w).get("terminationGracePeriodSeconds", 30)
        if grace < 60:
            err(f"terminationGracePeriodSeconds {grace}: too short for a graceful leave")
    if role == "env-worker":
        ports = {p["name"]: p["containerPort"] for p in (c.get("ports") or []) if p.get("name")}
        listen = arg_after(args, "--listen")
        lp = listen and re.fullmatch(r".*:([0-9]+)", listen)
        if not lp or ports.get("tarpc") != int(lp.group(1)):
            err(f"--listen {listen} should bind the container port named tarpc ({ports.get('tarpc')})")


def check_roles(b: Bundle, r: Result) -> set[str]:
    """Every role container; returns the run ids they resolve."""
    run_ids: dict[str, set[str]] = {}
    roles_seen: set[str] = set()
    for kind, name, w, c, args, role in b.role_containers():
        roles_seen.add(role)
        cid = f"{kind}/{name} ({role})"
        err = lambda m, cid=cid: r.errors.append(f"{cid}: {m}")  # noqa: E731
        if c.get("command"):
            err("sets `command`: the image's ENTRYPOINT is `reagent`, the role goes in args")
        job = job_file(b, w, c, args, err)
        env = container_env(b, c)
        for n, v in env.items():
            if n.startswith("REAGENT__") and re.search(r"\$\([A-Za-z_][A-Za-z0-9_]*\)", v):
                err(f"{n}={v!r}: references a variable the container does not define")
        if job is None:
            continue
        where, text = job
        # A value the cluster fills in (a Secret not rendered here) is not judged; the checks
        # below see it as `<from the cluster>`.
        overrides = tuple(sorted((n, v) for n, v in env.items()
                                 if n.startswith("REAGENT__") and v != "<from the cluster>"))
        resolved, problem = resolve_config(text, overrides)
        if resolved is None:
            named = ", ".join(n for n, _ in overrides)
            r.errors.append(f"{cid}: {where}" + (f" with {named}" if named else "") + f": {problem}")
            continue
        resolved = {**resolved, **{tuple(p.lower() for p in n.split("__")[1:]): v for n, v in env.items()
                                   if n.startswith("REAGENT__") and v == "<from the cluster>"}}
        run_ids.setdefault(role, set()).add(str(resolved.get(("run", "id"))))
        check_role_redis(b, r, role, resolved, env, err)
        check_role_env_workers(b, r, role, resolved, err)
        check_role_endpoint(w, c, resolved, err)
        check_role_run_dir(w, c, role, resolved, err)
        check_role_lifecycle(b, kind, w, c, args, role, resolved, err)
    for role in ROLES:
        if role not in roles_seen:
            r.errors.append(f"no workload runs `reagent {role}`")
    ids = set().union(*run_ids.values()) if run_ids else set()
    if len(ids) > 1:
        r.errors.append(f"roles disagree on run.id: {run_ids}")
    return ids


# 7. Redis's own command line carries no password.
def check_redis_command_lines(b: Bundle, r: Result) -> None:
    for (kind, name), w in b.workloads.items():
        for c in (b.pod_spec(w).get("containers") or []) + (b.pod_spec(w).get("initContainers") or []):
            line = " ".join(str(a) for a in (c.get("command") or []) + (c.get("args") or []))
            if "redis-server" in line and re.search(r"requirepass|PASSWORD", line):
                r.errors.append(f"{kind}/{name} ({c.get('name')}): a password on redis-server's command line "
                                "(readable by any process on the node): use the ACL file")


# 6. KEDA streams belong to this run and are read by the right group.
def check_keda_streams(b: Bundle, r: Result, ids: set[str]) -> None:
    for name, so in b.of_kind("ScaledObject").items():
        target = ((so.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
        w = b.workloads.get(("Deployment", target))
        target_roles = {str(c.get("args", [""])[0]) for c in (b.pod_spec(w).get("containers") or [])} if w else set()
        for i, t in enumerate(so["spec"].get("triggers") or []):
            if t.get("type") != "redis-streams":
                continue
            md = t.get("metadata") or {}
            m = re.fullmatch(r"reagent:\{([A-Za-z0-9_-]{1,64})\}:([a-z]+)", md.get("stream", ""))
            if not m:
                r.errors.append(f"ScaledObject/{name}: triggers[{i}] stream {md.get('stream')!r} is no Reagent "
                                "stream (reagent:{<run id>}:rollouts or :scored)")
                continue
            run, short = m.groups()
            if run not in ids:
                r.errors.append(f"ScaledObject/{name}: triggers[{i}] watches run {run!r}, but the roles run {sorted(ids)} "
                                "(run.id in the job file)")
            group, role = STREAM_GROUPS.get(short, (None, None))
            if group is None:
                r.errors.append(f"ScaledObject/{name}: stream {short!r} is neither rollouts nor scored")
            elif md.get("consumerGroup") and md["consumerGroup"] != group:
                r.errors.append(f"ScaledObject/{name}: {short} is read by group {group!r}, not {md['consumerGroup']!r}")
            elif role not in target_roles:
                r.errors.append(f"ScaledObject/{name}: scales {target} on the {short} stream, read by `reagent {role}`")


def check_objects(objs: list[dict], validate, versions) -> Result:
    r = Result()
    b = Bundle(objs)
    check_schemas(b, r, validate, versions)
    check_namespace(b, r)
    check_workload_references(b, r)
    check_gpu_placement(b, r)
    check_services(b, r)
    check_disruption_budgets(b, r)
    check_autoscalers(b, r)
    check_service_monitors(b, r)
    ids = check_roles(b, r)
    check_redis_command_lines(b, r)
    r.errors.extend(k8s_netpol.check(b.by_kind, b.workloads))
    check_keda_streams(b, r, ids)
    return r


# --------------------------------------------------------------------------------------------
# Grafana dashboard


def metric_names() -> set[str]:
    names = set()
    for p in ROOT.rglob("*.rs"):
        rel = p.relative_to(ROOT).parts
        if rel[0] in ("target", ".libtorch") or rel[0].startswith("."):
            continue
        names.update(re.findall(r'"(reagent_[a-z0-9_]+)"', p.read_text(errors="replace")))
    return names


def check_dashboard() -> list[str]:
    errors = []
    try:
        dash = json.loads(DASHBOARD.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return [f"{DASHBOARD.relative_to(ROOT)}: {e}"]
    known = metric_names()
    exprs: list[str] = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("expr", "query", "definition") and isinstance(v, str):
                    exprs.append(v)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(dash)
    used = {m for e in exprs for m in re.findall(r"\breagent_[a-z0-9_]+", e)}
    for m in sorted(used):
        base = re.sub(r"_(bucket|sum|count)$", "", m)
        if m not in known and base not in known:
            errors.append(f"dashboard: metric {m} is defined nowhere in the Rust sources")
    ids = [p.get("id") for p in dash.get("panels", [])]
    if len(ids) != len(set(ids)):
        errors.append("dashboard: panel ids are not unique")
    if not used:
        errors.append("dashboard: no reagent_ metric in any query")
    return errors


# --------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kustomize", required=True, help="the render command, e.g. 'kubectl kustomize'")
    args = ap.parse_args()
    kustomize = shlex.split(args.kustomize)

    validate, versions = schema_validator()
    import kubernetes_validate

    print(f"k8s: render with `{args.kustomize}`; schemas from kubernetes-validate "
          f"{kubernetes_validate.__version__} (Kubernetes {', '.join(v.rsplit('.', 1)[0] for v in versions)}); "
          f"each role's configuration through `{REAGENT} config show`")
    passed = failed = 0
    notes: set[str] = set()
    try:
        vs = variants()
    except Exception as e:  # an overlay's kustomization.yaml that does not parse
        print(f"FAIL cluster/k8s: {e}")
        print("k8s check: 0 passed, 1 failed")
        return 1
    width = max(len(v.name) for v in vs)
    for v in vs:
        objs: list[dict] = []
        try:
            objs = render(kustomize, v.path)
            res = check_objects(objs, validate, versions)
        except Exception as e:  # this variant's failure, not the run's
            res = Result(errors=[f"{type(e).__name__}: {e}"])
        notes.update(res.notes)
        if res.errors:
            failed += 1
            print(f"FAIL {v.name:<{width}}  {len(objs)} objects")
            for e in res.errors:
                print(f"       - {e}")
        else:
            passed += 1
            print(f"ok   {v.name:<{width}}  {len(objs)} objects ({res.schema_checked} schema-validated, "
                  f"{res.custom_checked} custom resources checked here)")
    dash_errors = check_dashboard()
    name = str(DASHBOARD.relative_to(ROOT))
    if dash_errors:
        failed += 1
        print(f"FAIL {name}")
        for e in dash_errors:
            print(f"       - {e}")
    else:
        passed += 1
        print(f"ok   {name:<{width}}  every metric it queries is defined in the sources")
    for n in sorted(notes):
        print(f"note: {n}")
    shutil.rmtree(WORK, ignore_errors=True)
    print(f"k8s check: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
