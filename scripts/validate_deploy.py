"""Checks the deployment files in deploy/ without running any of them.

Run by scripts/validate-deploy (which makes the virtualenv this needs):

- every STOCKADE_* name in deploy/compose.yaml, deploy/compose/ and
  deploy/kubernetes/ is a setting declared in crates/stockade-server/src/config/;
- deploy/compose.yaml, structurally against the compose specification (known
  keys, an image for every service, referenced files, volumes, networks and
  services exist, health checks and restart policies, the Stockade services'
  stop_grace_period above their shutdown timeout) and against the HAProxy,
  Prometheus and Grafana files beside it;
- deploy/kubernetes/: every file of kustomization.yaml against the
  Kubernetes schemas of kubernetes-validate (strict, two versions), the
  ServiceMonitor against a schema of its own (it is a CRD, not in those
  schemas), and the references between the manifests.

Every problem is printed as `FILE: problem`; the exit status is 1 if any.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml
from kubernetes_validate import utils as kv

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
# Each setting's variable is declared once, as `env = "STOCKADE_..."` on its
# field in one of the group files of this directory.
SETTINGS_DIR = ROOT / "crates/stockade-server/src/config"
COMPOSE = DEPLOY / "compose.yaml"
KUSTOMIZE = DEPLOY / "kubernetes"
# The oldest Kubernetes the manifests support (the preStop sleep action is
# on by default from 1.30) and the newest kubernetes-validate ships.
K8S_VERSIONS = ["1.30.0", "1.37.0"]
# Seconds a stopping instance may still need after its shutdown timeout: the
# writer's final flush.
FLUSH_MARGIN_S = 5

problems: list[str] = []


def rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def problem(path: Path, message: str) -> None:
    problems.append(f"{rel(path)}: {message}")


def step(message: str) -> None:
    print(f"validate-deploy: {message}", flush=True)


def load_yaml_all(path: Path) -> list:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        problem(path, f"not readable YAML: {e}")
        return []


# ---------------------------------------------------------------- settings


def known_settings() -> set[str]:
    names = {name for path in sorted(SETTINGS_DIR.glob("*.rs"))
             for name in re.findall(r'env = "(STOCKADE_[A-Z0-9_]+)"', path.read_text())}
    if len(names) < 20:
        problem(SETTINGS_DIR, f"found only {len(names)} STOCKADE_* settings: have the declarations moved?")
    return names


def check_setting_names(files: list[Path], settings: set[str]) -> int:
    seen = 0
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name in re.findall(r"STOCKADE_[A-Z0-9_]*[A-Z0-9]", line):
                seen += 1
                if name not in settings:
                    problem(
                        path,
                        f"line {number}: {name} is not a setting of stockade serve "
                        f"(not declared in {rel(SETTINGS_DIR)}; renamed or misspelled?)",
                    )
    return seen


# ---------------------------------------------------------------- compose

COMPOSE_TOP = {"version", "name", "services", "networks", "volumes", "secrets", "configs", "include"}
# The service keys of the compose specification (compose-spec.io, services).
COMPOSE_SERVICE = {
    "annotations", "attach", "blkio_config", "build", "cap_add", "cap_drop", "cgroup",
    "cgroup_parent", "command", "configs", "container_name", "cpu_count", "cpu_percent",
    "cpu_period", "cpu_quota", "cpu_rt_period", "cpu_rt_runtime", "cpu_shares", "cpus",
    "cpuset", "credential_spec", "depends_on", "deploy", "develop", "device_cgroup_rules",
    "devices", "dns", "dns_opt", "dns_search", "domainname", "entrypoint", "env_file",
    "environment", "expose", "extends", "external_links", "extra_hosts", "gpus", "group_add",
    "healthcheck", "hostname", "image", "init", "ipc", "isolation", "labels", "label_file",
    "links", "logging", "mac_address", "mem_limit", "mem_reservation", "mem_swappiness",
    "memswap_limit", "network_mode", "networks", "oom_kill_disable", "oom_score_adj", "pid",
    "pids_limit", "platform", "ports", "post_start", "pre_stop", "privileged", "profiles",
    "pull_policy", "read_only", "restart", "runtime", "scale", "secrets", "security_opt",
    "shm_size", "stdin_open", "stop_grace_period", "stop_signal", "storage_opt", "sysctls",
    "tmpfs", "tty", "ulimits", "user", "userns_mode", "uts", "volumes", "volumes_from",
    "working_dir",
}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}
RESTART = {"no", "always", "on-failure", "unless-stopped"}


def seconds(value) -> float | None:
    """A compose duration (`30s`, `1m30s`, `500ms`) in seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    parts = re.findall(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)", str(value))
    if not parts or "".join(n + u for n, u in parts) != str(value):
        return None
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in parts)


def env_dict(service: dict) -> dict:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return env


def check_compose(settings: set[str]) -> None:
    docs = load_yaml_all(COMPOSE)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        problem(COMPOSE, "must be one YAML mapping")
        return
    spec = docs[0]
    for key in spec:
        if key not in COMPOSE_TOP and not key.startswith("x-"):
            problem(COMPOSE, f"unknown top-level key {key!r} (compose spec: {sorted(COMPOSE_TOP)} or x-*)")
    services = spec.get("services") or {}
    volumes = set((spec.get("volumes") or {}).keys())
    networks = set((spec.get("networks") or {}).keys())
    if not services:
        problem(COMPOSE, "no services")
    stockade = []
    for name, service in services.items():
        where = f"service {name}"
        if not isinstance(service, dict):
            problem(COMPOSE, f"{where}: not a mapping")
            continue
        for key in service:
            if key not in COMPOSE_SERVICE and not key.startswith("x-"):
                problem(COMPOSE, f"{where}: unknown key {key!r} (not in the compose specification)")
        if "image" not in service and "build" not in service:
            problem(COMPOSE, f"{where}: neither image nor build")
        if service.get("restart") not in RESTART:
            problem(COMPOSE, f"{where}: restart must be one of {sorted(RESTART)}, is {service.get('restart')!r}")
        check_healthcheck(where, service.get("healthcheck"))
        for volume in service.get("volumes") or []:
            source = (volume.get("source") if isinstance(volume, dict) else volume.split(":", 1)[0]) or ""
            if source.startswith((".", "/")):
                if not (COMPOSE.parent / source).exists():
                    problem(COMPOSE, f"{where}: mounts {source}, which does not exist (relative to deploy/)")
            elif source not in volumes:
                problem(COMPOSE, f"{where}: volume {source!r} is not declared under top-level volumes")
        wanted = service.get("networks") or []
        for network in wanted if isinstance(wanted, list) else wanted.keys():
            if network not in networks:
                problem(COMPOSE, f"{where}: network {network!r} is not declared under top-level networks")
        depends = service.get("depends_on") or []
        for other in depends if isinstance(depends, list) else depends.keys():
            if other not in services:
                problem(COMPOSE, f"{where}: depends_on {other!r}, which is no service")
        if str(service.get("image", "")).split(":")[0] == "stockade":
            stockade.append(name)
            check_stockade_service(name, service, settings)
            check_build(where, service.get("build"))
            if "STOCKADE_RATE_LIMIT_INSTANCES" in env_dict(service):
                problem(COMPOSE, f"{where}: STOCKADE_RATE_LIMIT_INSTANCES is set by hand: the live instances are counted in the store")
    if len(stockade) < 2:
        problem(COMPOSE, f"expected several Stockade instances (image stockade:…), found {stockade}")
    if not any(s.get("ports") for s in services.values() if isinstance(s, dict)):
        problem(COMPOSE, "no service publishes a port: the load balancer should")
    check_haproxy(services, stockade)
    check_prometheus(services, stockade)
    check_grafana(services)


def check_build(where: str, build) -> None:
    """`up` builds the image where there is none (issue 36): from the
    repository root, with the Containerfile."""
    if not isinstance(build, dict):
        problem(COMPOSE, f"{where}: no build: (context the repository root, deploy/container/Containerfile)")
        return
    context = (COMPOSE.parent / str(build.get("context", ""))).resolve()
    if context != COMPOSE.parent.parent.resolve():
        problem(COMPOSE, f"{where}: build context {build.get('context')!r} is not the repository root")
    if build.get("dockerfile") != "deploy/container/Containerfile":
        problem(COMPOSE, f"{where}: build dockerfile {build.get('dockerfile')!r} is not deploy/container/Containerfile")


def check_healthcheck(where: str, check) -> None:
    if not isinstance(check, dict):
        problem(COMPOSE, f"{where}: no healthcheck")
        return
    for key in check:
        if key not in HEALTHCHECK_KEYS:
            problem(COMPOSE, f"{where}: healthcheck has unknown key {key!r}")
    test = check.get("test")
    if not (isinstance(test, list) and test and test[0] in ("CMD", "CMD-SHELL")) and not isinstance(test, str):
        problem(COMPOSE, f"{where}: healthcheck test must be [CMD, …], [CMD-SHELL, …] or a string")
    for key in ("interval", "timeout", "start_period"):
        if key in check and seconds(check[key]) is None:
            problem(COMPOSE, f"{where}: healthcheck {key} {check[key]!r} is not a duration")


def check_stockade_service(name: str, service: dict, settings: set[str]) -> None:
    where = f"service {name}"
    env = env_dict(service)
    for key in env:
        # (A STOCKADE_* name that is no setting is reported by check_setting_names.)
        if not key.startswith("STOCKADE_"):
            problem(COMPOSE, f"{where}: sets {key}; Stockade is configured only by STOCKADE_* variables")
    command = service.get("command") or []
    if (command if isinstance(command, list) else str(command).split())[:1] != ["serve"]:
        problem(COMPOSE, f"{where}: command must be `serve`, is {command!r}")
    for required in ("STOCKADE_LISTEN", "STOCKADE_ENGINE", "STOCKADE_REDIS_URL", "STOCKADE_DATABASE_URL",
                     "STOCKADE_ADMIN_TOKEN", "STOCKADE_ADMISSION_SECRET", "STOCKADE_DRAW_KEY"):
        if required not in env:
            problem(COMPOSE, f"{where}: {required} is not set")
    if not str(env.get("STOCKADE_LISTEN", "")).startswith("0.0.0.0:"):
        problem(COMPOSE, f"{where}: STOCKADE_LISTEN must listen on 0.0.0.0 to be reachable from the load balancer")
    test = " ".join(map(str, (service.get("healthcheck") or {}).get("test") or []))
    if "/readyz" not in test:
        problem(COMPOSE, f"{where}: the healthcheck should ask /readyz, asks {test!r}")
    shutdown_s = int(env.get("STOCKADE_SHUTDOWN_TIMEOUT_MS", 10000)) / 1000
    grace = seconds(service.get("stop_grace_period", "10s"))
    if grace is None or grace < shutdown_s + FLUSH_MARGIN_S:
        problem(COMPOSE, f"{where}: stop_grace_period {service.get('stop_grace_period', '10s (default)')} "
                         f"must exceed the shutdown timeout ({shutdown_s:g} s) by {FLUSH_MARGIN_S} s at least")
    if service.get("stop_signal", "SIGTERM") != "SIGTERM":
        problem(COMPOSE, f"{where}: stop_signal must be SIGTERM (the graceful stop)")


def check_haproxy(services: dict, stockade: list[str]) -> None:
    balancers = [n for n, s in services.items() if str(s.get("image", "")).startswith("haproxy")]
    if len(balancers) != 1:
        problem(COMPOSE, f"expected one haproxy service, found {balancers}")
        return
    name = balancers[0]
    cfg_path = next((COMPOSE.parent / v.split(":")[0] for v in services[name].get("volumes") or []
                     if isinstance(v, str) and v.split(":")[0].endswith(".cfg")), None)
    if cfg_path is None or not cfg_path.exists():
        problem(COMPOSE, f"service {name}: mounts no haproxy .cfg file that exists")
        return
    cfg = cfg_path.read_text()
    servers = re.findall(r"^\s*server\s+\S+\s+([\w.-]+):8080\b", cfg, re.M)
    if sorted(servers) != sorted(stockade):
        problem(cfg_path, f"backend servers {sorted(servers)} differ from the Stockade services {sorted(stockade)}")
    if not re.search(r"^\s*option\s+httpchk\s+GET\s+/readyz\s*$", cfg, re.M):
        problem(cfg_path, "no `option httpchk GET /readyz`: instances that are not ready would get traffic")
    if not re.search(r"\bcheck\b", cfg):
        problem(cfg_path, "the servers are not health-checked (`check`)")
    address = ((services[name].get("networks") or {}).get("stockade") or {}).get("ipv4_address") \
        if isinstance(services[name].get("networks"), dict) else None
    for instance in stockade:
        trusted = str(env_dict(services[instance]).get("STOCKADE_TRUSTED_PROXIES", ""))
        if not address or address not in [t.strip() for t in trusted.split(",")]:
            problem(COMPOSE, f"service {instance}: STOCKADE_TRUSTED_PROXIES ({trusted!r}) does not name "
                             f"the load balancer's fixed address ({address!r})")


def check_prometheus(services: dict, stockade: list[str]) -> None:
    proms = [n for n, s in services.items() if "prometheus" in str(s.get("image", ""))]
    if len(proms) != 1:
        problem(COMPOSE, f"expected one prometheus service, found {proms}")
        return
    mounts = {}
    for volume in services[proms[0]].get("volumes") or []:
        parts = volume.split(":")
        if parts[0].startswith("."):
            mounts[parts[1]] = COMPOSE.parent / parts[0]
    config_path = mounts.get("/etc/prometheus/prometheus.yml")
    if config_path is None or not config_path.exists():
        problem(COMPOSE, f"service {proms[0]}: mounts no prometheus.yml at /etc/prometheus/prometheus.yml")
        return
    config = (load_yaml_all(config_path) or [{}])[0]
    targets = [t for job in config.get("scrape_configs") or [] for sc in job.get("static_configs") or []
               for t in sc.get("targets") or []]
    for instance in stockade:
        if f"{instance}:8080" not in targets:
            problem(config_path, f"does not scrape {instance}:8080")
    rules = config.get("rule_files") or []
    if not rules:
        problem(config_path, "loads no rule_files: the alerts of deploy/prometheus/alerts.yml")
    for rule in rules:
        in_repo = (config_path.parent / rule).resolve()
        in_container = os.path.normpath(f"/etc/prometheus/{rule}")
        if in_repo != (DEPLOY / "prometheus/alerts.yml").resolve():
            problem(config_path, f"rule file {rule} is not deploy/prometheus/alerts.yml in the repository")
        if mounts.get(in_container, Path("/nonexistent")).resolve() != in_repo:
            problem(COMPOSE, f"service {proms[0]}: {rule} of prometheus.yml is {in_container} in the "
                             f"container, where {rel(in_repo)} is not mounted")


def check_grafana(services: dict) -> None:
    grafanas = [n for n, s in services.items() if "grafana" in str(s.get("image", ""))]
    if len(grafanas) != 1:
        problem(COMPOSE, f"expected one grafana service, found {grafanas}")
        return
    mounts = {}
    for volume in services[grafanas[0]].get("volumes") or []:
        parts = volume.split(":")
        if parts[0].startswith("."):
            mounts[parts[1]] = COMPOSE.parent / parts[0]
    provisioning = mounts.get("/etc/grafana/provisioning")
    if provisioning is None:
        problem(COMPOSE, f"service {grafanas[0]}: nothing mounted at /etc/grafana/provisioning")
        return
    dashboards = [p for f in sorted((provisioning / "dashboards").glob("*.y*ml"))
                  for p in (load_yaml_all(f) or [{}])[0].get("providers") or []]
    paths = [p.get("options", {}).get("path") for p in dashboards]
    dashboard = (DEPLOY / "grafana/stockade.json").resolve()
    if not any((mounts.get(f"{path}/stockade.json") or Path("/nonexistent")).resolve() == dashboard
               for path in paths if path):
        problem(provisioning, f"no dashboard provider path ({paths}) holds deploy/grafana/stockade.json as mounted")
    sources = [d for f in sorted((provisioning / "datasources").glob("*.y*ml"))
               for d in (load_yaml_all(f) or [{}])[0].get("datasources") or []]
    if not any(d.get("type") == "prometheus" and "prometheus:9090" in str(d.get("url")) for d in sources):
        problem(provisioning, "no Prometheus data source at http://prometheus:9090")


# ---------------------------------------------------------------- kubernetes

# The part of the Prometheus Operator's ServiceMonitor CRD
# (monitoring.coreos.com/v1) these manifests use; unknown keys are refused,
# so a misspelling fails as it would on a cluster.
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "additionalProperties": False,
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "targetLabels": {"type": "array", "items": {"type": "string"}},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "sampleLimit": {"type": "integer", "minimum": 0},
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "matchExpressions": {"type": "array"},
                    },
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "targetPort": {"type": ["string", "integer"]},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": r"^(\d+(ms|s|m|h))+$"},
                            "scrapeTimeout": {"type": "string", "pattern": r"^(\d+(ms|s|m|h))+$"},
                            "honorLabels": {"type": "boolean"},
                            "relabelings": {"type": "array"},
                            "metricRelabelings": {"type": "array"},
                        },
                    },
                },
            },
        },
    },
}


def kustomization_resources(directory: Path) -> list:
    """The resources a kustomization (or component) lists, as (path, resource)."""
    kustomization_path = directory / "kustomization.yaml"
    kustomization = (load_yaml_all(kustomization_path) or [{}])[0]
    listed = kustomization.get("resources") or []
    present = sorted(p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")
    for name in present:
        if name not in listed:
            problem(kustomization_path, f"{name} is in {rel(directory)}/ but not under resources")
    resources = []
    for name in listed:
        path = directory / name
        if not path.is_file():
            problem(kustomization_path, f"lists {name}, which does not exist")
            continue
        for resource in load_yaml_all(path):
            resources.append((path, resource))
            validate_resource(path, resource)
    return resources


def check_kustomize_build() -> None:
    """`kubectl kustomize` (kustomize built into kubectl) on the base, where
    kubectl is installed: it renders, with no Secret and no ServiceMonitor."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        step("  kubectl is not installed: the kustomization is read by this script alone")
        return
    built = subprocess.run([kubectl, "kustomize", str(KUSTOMIZE)], capture_output=True, text=True)
    if built.returncode != 0:
        problem(KUSTOMIZE, f"kubectl kustomize failed: {built.stderr.strip()}")
        return
    kinds = [r.get("kind") for r in yaml.safe_load_all(built.stdout) if r]
    for kind in ("Secret", "ServiceMonitor"):
        if kind in kinds:
            problem(KUSTOMIZE, f"kubectl kustomize renders a {kind}")
    step(f"  kubectl kustomize {rel(KUSTOMIZE)}: {', '.join(kinds)}")


def check_kubernetes(settings: set[str]) -> None:
    check_kustomize_build()
    resources = kustomization_resources(KUSTOMIZE)
    check_applies_cleanly(resources)
    check_references(resources)
    component = KUSTOMIZE / "components" / "servicemonitor"
    if not (component / "kustomization.yaml").is_file():
        problem(component, "no opt-in component for the ServiceMonitor")
        return
    kind = ((load_yaml_all(component / "kustomization.yaml") or [{}])[0]).get("kind")
    if kind != "Component":
        problem(component / "kustomization.yaml", f"kind is {kind!r}, expected Component")
    monitors = kustomization_resources(component)
    services = [(p, r) for p, r in resources if r.get("kind") == "Service"]
    check_service_monitors(monitors, services)


# Values that mark a credential still to be chosen.
PLACEHOLDER = re.compile(r"replace[-_ ]?me|change[-_ ]?me|placeholder|<[^>]*>|\.\.\.|xxxx", re.IGNORECASE)


def check_applies_cleanly(resources: list) -> None:
    """What `kubectl apply -k` on a real cluster needs (issue 36, item 4)."""
    kustomization_path = KUSTOMIZE / "kustomization.yaml"
    kustomization = (load_yaml_all(kustomization_path) or [{}])[0]
    for path, resource in resources:
        kind = resource.get("kind")
        if kind == "Secret":
            values = {**(resource.get("data") or {}), **(resource.get("stringData") or {})}
            marked = sorted(k for k, v in values.items() if PLACEHOLDER.search(str(v)))
            if marked:
                problem(path, f"Secret {resource['metadata']['name']} carries placeholders in {', '.join(marked)}: "
                              "`kubectl apply -k` would overwrite the Secret made by hand with them")
            else:
                problem(path, f"Secret {resource['metadata']['name']} in the base: `kubectl apply -k` would "
                              "overwrite the one made by hand; create it beside the kustomization (docs/deploy.md)")
        if kind == "ServiceMonitor":
            problem(path, "a ServiceMonitor in the base: a cluster without the Prometheus Operator refuses "
                          "the whole apply; make it opt-in (components/servicemonitor)")
        if kind == "PodDisruptionBudget":
            spec = resource["spec"]
            if spec.get("maxUnavailable") != 1 or "minAvailable" in spec:
                problem(path, f"PodDisruptionBudget: maxUnavailable must be 1 (and no minAvailable), not {spec}")
        if kind == "ConfigMap":
            data = resource.get("data") or {}
            if "STOCKADE_RATE_LIMIT_INSTANCES" in data:
                problem(path, "STOCKADE_RATE_LIMIT_INSTANCES is set by hand: the live instances are counted in the store")
            if not data.get("STOCKADE_TRUSTED_PROXIES"):
                problem(path, "STOCKADE_TRUSTED_PROXIES is not set: behind an ingress every buyer is the "
                              "controller's address, held to the per-client connection cap")
    version = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.MULTILINE)
    tags = {i.get("name"): i.get("newTag") for i in kustomization.get("images") or []}
    tag = tags.get("stockade")
    if tag in (None, "latest"):
        problem(kustomization_path, f"the stockade image's tag is {tag!r}: pin it (the workspace version)")
    elif version and tag != version.group(1):
        problem(kustomization_path, f"the stockade image's tag {tag} is not the workspace version {version.group(1)}")
    secret_keys = set()
    for path, resource in resources:
        if resource.get("kind") != "Deployment":
            continue
        for container in resource["spec"]["template"]["spec"]["containers"]:
            for item in container.get("env") or []:
                ref = (item.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    secret_keys.add((ref["name"], ref["key"]))
    guide = (ROOT / "docs/deploy.md").read_text()
    for name, key in sorted(secret_keys):
        command = re.search(rf"kubectl create secret generic {re.escape(name)}\b[^`]*", guide)
        if not command:
            problem(ROOT / "docs/deploy.md", f"does not show `kubectl create secret generic {name}` (the Secret the Deployment reads)")
        elif key not in command.group(0):
            problem(ROOT / "docs/deploy.md", f"`kubectl create secret generic {name}` does not set {key}")


def validate_resource(path: Path, resource: dict) -> None:
    kind = resource.get("kind")
    if kind == "ServiceMonitor":
        errors = sorted(jsonschema.Draft7Validator(SERVICE_MONITOR_SCHEMA).iter_errors(resource), key=str)
        for error in errors:
            at = ".".join(map(str, error.absolute_path)) or "(top)"
            problem(path, f"ServiceMonitor {at}: {error.message}")
        step(f"  {rel(path)}: {kind} checked against the ServiceMonitor schema of validate_deploy.py")
        return
    for version in K8S_VERSIONS:
        try:
            kv.validate(resource, version, strict=True)
        except kv.ValidationError as e:
            at = ".".join(map(str, e.path)) or "(top)"
            problem(path, f"{kind} against Kubernetes {version}: {at}: {e.message}")
        except kv.SchemaNotFoundError as e:
            problem(path, f"{e.message}: not a core Kubernetes kind, and no schema of ours")
            return
    step(f"  {rel(path)}: {kind} valid against Kubernetes {' and '.join(K8S_VERSIONS)} (strict)")


def check_references(resources: list) -> None:
    by_kind: dict[str, list] = {}
    for path, resource in resources:
        by_kind.setdefault(resource.get("kind"), []).append((path, resource))
    config_maps = {r["metadata"]["name"]: r.get("data") or {} for _, r in by_kind.get("ConfigMap", [])}
    secrets = {r["metadata"]["name"]: {**(r.get("data") or {}), **(r.get("stringData") or {})}
               for _, r in by_kind.get("Secret", [])}
    deployments = by_kind.get("Deployment", [])
    if len(deployments) != 1:
        problem(KUSTOMIZE, f"expected one Deployment, found {len(deployments)}")
        return
    path, deployment = deployments[0]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"].get("labels") or {}
    if spec.get("replicas") != 3:
        problem(path, f"replicas is {spec.get('replicas')}, expected 3")
    if not set((spec["selector"].get("matchLabels") or {}).items()) <= set(pod_labels.items()):
        problem(path, "the selector does not match the pod template's labels")
    containers = [c for c in pod["containers"] if c["name"] == "stockade"]
    if not containers:
        problem(path, "no container named stockade")
        return
    container = containers[0]
    env = {}
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            if name not in config_maps:
                problem(path, f"envFrom names ConfigMap {name}, which is not in the kustomization")
            env.update(config_maps.get(name, {}))
        if "secretRef" in source:
            name = source["secretRef"]["name"]
            if name not in secrets:
                problem(path, f"envFrom names Secret {name}, which is not in the kustomization")
            env.update(secrets.get(name, {}))
    for item in container.get("env") or []:
        ref = (item.get("valueFrom") or {}).get("secretKeyRef") or (item.get("valueFrom") or {}).get("configMapKeyRef")
        if ref:
            table = secrets if "secretKeyRef" in item["valueFrom"] else config_maps
            if table is secrets and ref["name"] not in secrets:
                pass  # made by hand beside the kustomization: checked against docs/deploy.md
            elif ref["key"] not in table.get(ref["name"], {}):
                problem(path, f"env {item['name']} refers to {ref['name']}/{ref['key']}, which does not exist")
        env[item["name"]] = item.get("value", "(from a reference)")
    for name in env:
        if not name.startswith("STOCKADE_"):
            problem(path, f"the stockade container gets {name}; Stockade is configured only by STOCKADE_* variables")
    for required in ("STOCKADE_LISTEN", "STOCKADE_ENGINE", "STOCKADE_REDIS_URL", "STOCKADE_DATABASE_URL",
                     "STOCKADE_ADMIN_TOKEN", "STOCKADE_PAYMENTS_TOKEN", "STOCKADE_ADMISSION_SECRET",
                     "STOCKADE_DRAW_KEY",
                     "STOCKADE_JWT_SECRET", "STOCKADE_DATA_DIR"):
        if required not in env:
            problem(path, f"the stockade container does not get {required}")
    if (container.get("readinessProbe") or {}).get("httpGet", {}).get("path") != "/readyz":
        problem(path, "the readiness probe must ask /readyz")
    if (container.get("livenessProbe") or {}).get("httpGet", {}).get("path") != "/healthz":
        problem(path, "the liveness probe must ask /healthz")
    pre_stop = (container.get("lifecycle") or {}).get("preStop") or {}
    pre_stop_s = (pre_stop.get("sleep") or {}).get("seconds")
    if not pre_stop_s:
        problem(path, "no preStop sleep: the load balancer needs time to stop sending to a stopping pod")
    shutdown_s = int(env.get("STOCKADE_SHUTDOWN_TIMEOUT_MS", 10000)) / 1000
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace < (pre_stop_s or 0) + shutdown_s + FLUSH_MARGIN_S:
        problem(path, f"terminationGracePeriodSeconds {grace} must exceed the preStop sleep ({pre_stop_s} s) "
                      f"plus the shutdown timeout ({shutdown_s:g} s) by {FLUSH_MARGIN_S} s at least")
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(resources.get(part) or {}):
            problem(path, f"resources.{part} must set cpu and memory")
    security = container.get("securityContext") or {}
    if not (pod.get("securityContext") or {}).get("runAsNonRoot") and not security.get("runAsNonRoot"):
        problem(path, "runAsNonRoot is not set")
    if not security.get("readOnlyRootFilesystem"):
        problem(path, "readOnlyRootFilesystem is not set")
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    data_dir = env.get("STOCKADE_DATA_DIR")
    if data_dir not in mounts or "emptyDir" not in volumes.get(mounts.get(data_dir), {}):
        problem(path, f"STOCKADE_DATA_DIR ({data_dir}) is not a mounted emptyDir (the root filesystem is read-only)")
    ports = {p.get("name") for p in container.get("ports") or []}
    for spath, service in by_kind.get("Service", []):
        if not set(service["spec"].get("selector", {}).items()) <= set(pod_labels.items()):
            problem(spath, "the Service's selector does not match the Deployment's pods")
        for port in service["spec"].get("ports") or []:
            if isinstance(port.get("targetPort"), str) and port["targetPort"] not in ports:
                problem(spath, f"targetPort {port['targetPort']} is no port of the container")
    for ppath, pdb in by_kind.get("PodDisruptionBudget", []):
        if not set(pdb["spec"]["selector"].get("matchLabels", {}).items()) <= set(pod_labels.items()):
            problem(ppath, "the PodDisruptionBudget's selector does not match the Deployment's pods")
    if not by_kind.get("PodDisruptionBudget"):
        problem(KUSTOMIZE, "no PodDisruptionBudget")


def check_service_monitors(monitors: list, services: list) -> None:
    for mpath, monitor in monitors:
        wanted = set(monitor["spec"]["selector"].get("matchLabels", {}).items())
        matched = [s for _, s in services if wanted <= set((s["metadata"].get("labels") or {}).items())]
        if not matched:
            problem(mpath, "the selector matches no Service's labels")
        names = {p.get("name") for s in matched for p in s["spec"].get("ports") or []}
        for endpoint in monitor["spec"]["endpoints"]:
            if endpoint.get("port") not in names:
                problem(mpath, f"endpoint port {endpoint.get('port')!r} is no named port of the Service")
    if not monitors:
        problem(KUSTOMIZE, "no ServiceMonitor in components/servicemonitor")


def check_containerfile() -> None:
    """The image's HEALTHCHECK asks liveness: a runtime restarts what fails
    it, which must not happen while an instance starts, drains or waits for
    a shared database (docs/operations.md, Probes)."""
    path = DEPLOY / "container/Containerfile"
    text = path.read_text().replace("\\\n", " ")
    checks = [line for line in text.splitlines() if line.startswith("HEALTHCHECK")]
    if len(checks) != 1:
        problem(path, f"expected one HEALTHCHECK, found {len(checks)}")
    elif "/healthz" not in checks[0] or "/readyz" in checks[0]:
        problem(path, f"the HEALTHCHECK should ask /healthz (liveness), asks {checks[0]!r}")


def main() -> int:
    settings = known_settings()
    files = [COMPOSE, *sorted(p for p in (DEPLOY / "compose").rglob("*") if p.is_file()),
             *sorted(KUSTOMIZE.glob("*.yaml"))]
    step(f"{len(settings)} settings in {rel(SETTINGS_DIR)}")
    named = check_setting_names(files, settings)
    step(f"STOCKADE_* names: {named} uses in {len(files)} files checked against them")
    step(f"{rel(COMPOSE)}: structure, files, health checks, grace periods, HAProxy, Prometheus, Grafana")
    check_compose(settings)
    step(f"{rel(KUSTOMIZE)}: every resource of kustomization.yaml")
    check_kubernetes(settings)
    step("deploy/container/Containerfile: the HEALTHCHECK asks liveness")
    check_containerfile()
    if problems:
        for line in problems:
            print(f"validate-deploy: FAILED {line}", file=sys.stderr)
        print(f"validate-deploy: {len(problems)} problem(s) in the deployment files", file=sys.stderr)
        return 1
    step("deployment files valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
