#!/usr/bin/env python3
"""Checks deploy/ against the programs it runs.

Reads every Kubernetes manifest (*.yaml), Dockerfile, systemd unit and
README under --deploy-dir, finds each invocation of hypertuned, hypertune
and hypertune-train (a container's command, a Dockerfile's CMD, a unit's
ExecStart with each HYPERTUNED_OPTS of its environment file, a line of a
README's sh blocks) and checks:

- every flag is one the program's --help lists, in a place the program takes
  it (hypertune's global flags before the command), with its value;
- the ports agree: hypertuned's --listen and --http with the container's
  ports named grpc and http and with the Dockerfile's EXPOSE; each Service's
  targetPort and each probe's port with a port of the pods it selects; each
  client address (HYPERTUNE_SERVER, --server) with a Service of the same
  manifests, or with a StatefulSet's pod behind its headless Service;
- a few things the setups rely on: hypertuned listening beyond loopback in a
  container, the workers' checkpoints on a ReadWriteMany volume, the unit's
  database in its StateDirectory and its token file a LoadCredential, the
  pods' runAsUser the image's USER.

What the manifests use that the programs do not have yet, but are designed
to (PLANNED, each naming its issue), is reported as planned, never passed in
silence: `--planned` exits 77 (ctest: skipped) while any such use remains,
listing them.

The manifests are read with PyYAML (Debian's python3-yaml), as YAML 1.1 the
way Kubernetes reads them, refusing a key given twice and a plain scalar that
YAML 1.2 reads otherwise (yes, on, 0755: quote it).

Usage:
  check_deploy.py --hypertuned BIN --hypertune BIN --hypertune-train BIN
                  --deploy-dir DIR [--planned | --expect-error TEXT]
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional

import yaml

PROGRAMS = ("hypertuned", "hypertune", "hypertune-train")
DEFAULT_GRPC_PORT = 50051  # hypertune's default port (trainer_sdk/hypertune.h)


# --- Planned: designed, not in the programs yet ------------------------------

@dataclass
class Planned:
    """A use the manifests make of a designed feature the programs lack."""
    what: str
    issue: str
    # Matches a use: (program, flag or "env:NAME" or "probe:grpc", value).
    matches: Callable[[str, str, str], bool]
    # Whether the programs have it now (then the use is checked as any other).
    present: Callable[["Programs"], bool]
    why_absent: str


PLANNED = [
    Planned(
        what="a PostgreSQL URL for hypertuned --db",
        issue="issue 21 (PostgreSQL store, leader and standby)",
        matches=lambda prog, flag, value: prog == "hypertuned" and flag == "--db"
        and re.match(r"(?i)postgres(ql)?://", value) is not None,
        present=lambda programs: "postgres" in programs.help("hypertuned").lower(),
        why_absent="`hypertuned --help` does not mention PostgreSQL "
                   "(storage/open_store.cc refuses postgresql:// in this build)"),
    Planned(
        what="a list of servers for the clients (HOST:PORT,HOST:PORT)",
        issue="issue 21 (clients follow the leader among several servers)",
        matches=lambda prog, flag, value: prog == "hypertune"
        and flag in ("--server", "env:HYPERTUNE_SERVER") and "," in value,
        present=lambda programs: re.search(
            r"HOST:PORT\s*\[?,", programs.help("hypertune")) is not None,
        why_absent="`hypertune --help` shows one HOST:PORT for --server"),
    Planned(
        what="a gRPC readiness probe (grpc.health.v1)",
        issue="issue 21 (standard health service: SERVING only while leading; "
              "DESIGN.md, gRPC conventions)",
        matches=lambda prog, flag, value: flag == "probe:grpc",
        present=lambda programs: programs.binary_mentions(
            "hypertuned", (b"grpc.health.v1.Health", b"EnableDefaultHealthCheckService")),
        why_absent="hypertuned does not serve grpc.health.v1 (no health service "
                   "in service/)"),
]


# --- The programs: flags from --help ------------------------------------------

@dataclass
class FlagSet:
    takes_value: dict  # flag -> bool


class Programs:
    """The programs' --help texts and the flags they list."""

    def __init__(self, paths: dict):
        self.paths = paths
        self._help = {}

    def help(self, program: str, *words: str) -> str:
        key = (program,) + words
        if key not in self._help:
            cmd = [self.paths[program], *words, "--help"]
            run = subprocess.run(cmd, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=60)
            if run.returncode != 0:
                raise SystemExit(f"error: `{' '.join(cmd)}` exited "
                                 f"{run.returncode}:\n{run.stdout}")
            self._help[key] = run.stdout
        return self._help[key]

    def binary_mentions(self, program: str, needles) -> bool:
        with open(self.paths[program], "rb") as f:
            data = f.read()
        return any(n in data for n in needles)

    @staticmethod
    def flags_in(text: str, normalize=lambda f: f) -> FlagSet:
        """Every --flag in `text`; it takes a value where some mention shows
        one (`--db PATH`, `--durability normal|full`, `--lr 0.1`)."""
        value_token = (r"(?:[A-Z0-9][^\s\]]*|[a-z0-9.-]+\|[^\s\]]+|true|false)"
                       r"(?=[\s\]]|$)")
        takes = {}
        for m in re.finditer(r"--([a-z][a-z0-9_-]*)( (?=\S))?", text):
            name = normalize("--" + m.group(1))
            rest = text[m.end():]
            value = m.group(2) is not None and re.match(value_token, rest)
            takes[name] = takes.get(name, False) or bool(value)
        takes.pop("--help", None)
        return FlagSet(takes)

    def hypertuned_flags(self) -> FlagSet:
        return self.flags_in(self.help("hypertuned"))

    def train_flags(self) -> FlagSet:
        return self.flags_in(self.help("hypertune-train"), train_name)

    def cli_global_flags(self) -> FlagSet:
        text = self.help("hypertune")
        usage = text.split("\n\n", 1)[0]
        return self.flags_in(usage.split("<command>", 1)[0])

    def cli_commands(self) -> set:
        """Command paths the CLI's help lists: ("worker",), ("study", "create")."""
        paths = set()
        for line in self.help("hypertune").splitlines():
            m = re.match(r"^  ([a-z][a-z-]*)(?: ([a-z][a-z|-]*))?(?=\s|$)", line)
            if not m:
                continue
            if m.group(2):
                for sub in m.group(2).split("|"):
                    paths.add((m.group(1), sub))
            else:
                paths.add((m.group(1),))
        return paths

    def cli_command_flags(self, path) -> FlagSet:
        return self.flags_in(self.help("hypertune", *path))


def train_name(flag: str) -> str:
    # hypertune-train spells '-' in flag names '_' (train_main.cc).
    return "--" + flag[2:].replace("-", "_")


# --- Findings -------------------------------------------------------------------

@dataclass
class Report:
    errors: list = field(default_factory=list)
    planned: list = field(default_factory=list)   # (Planned, where, use)
    checked: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def error(self, where: str, message: str):
        line = f"{where}: {message}"
        if line not in self.errors:
            self.errors.append(line)

    def plan(self, planned: Planned, where: str, use: str):
        entry = (planned, where, use)
        if entry not in self.planned:
            self.planned.append(entry)


def planned_for(programs, prog, flag, value) -> Optional[Planned]:
    for p in PLANNED:
        if p.matches(prog, flag, value) and not p.present(programs):
            return p
    return None


# --- Invocations ----------------------------------------------------------------

@dataclass
class Invocation:
    where: str
    argv: list


def check_flags(argv, flagset, where, report, prog, programs, normalize=None):
    """Checks argv (flags, with `positional` allowed where the caller says)
    and returns {flag: value}. Flags must be `--flag value`."""
    values = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--"):
            report.error(where, f"{prog}: unexpected argument {token!r}")
            i += 1
            continue
        if "=" in token:
            report.error(where, f"{prog}: write {token.split('=')[0]} VALUE, "
                                "not --flag=VALUE (hypertuned takes no '=')")
            token = token.split("=", 1)[0]
        name = normalize(token) if normalize else token
        value = None
        if name not in flagset.takes_value:
            p = planned_for(programs, prog, token, "")
            if p:
                report.plan(p, where, f"{prog} {token}")
            else:
                report.error(where, f"{prog} has no flag {token} "
                                    f"(`{prog} --help` does not list it)")
            i += 1
            continue
        if flagset.takes_value[name]:
            if i + 1 >= len(argv):
                report.error(where, f"{prog}: {token} needs a value")
                break
            value = argv[i + 1]
            i += 2
            p = planned_for(programs, prog, token, value)
            if p:
                report.plan(p, where, f"{prog} {token} {value}")
        else:
            i += 1
        values[name] = value
    return values


def check_invocation(inv: Invocation, programs: Programs, report: Report):
    """Checks one command line; returns [(program, {flag: value})] for it and
    the program it runs (hypertune worker -- hypertune-train ...)."""
    if not inv.argv:
        report.error(inv.where, "empty command")
        return []
    prog = os.path.basename(inv.argv[0])
    args = inv.argv[1:]
    if prog not in PROGRAMS:
        report.error(inv.where, f"runs {inv.argv[0]!r}, which is none of "
                                f"{', '.join(PROGRAMS)}: the check cannot read it")
        return []
    line = f"{inv.where}: {' '.join(inv.argv)}"
    if line not in report.checked:
        report.checked.append(line)
    if prog == "hypertuned":
        return [(prog, check_flags(args, programs.hypertuned_flags(), inv.where,
                                   report, prog, programs))]
    if prog == "hypertune-train":
        return [(prog, check_flags(args, programs.train_flags(), inv.where,
                                   report, prog, programs, train_name))]

    # hypertune [global flags] COMMAND [args and flags] [-- CMD...]
    globals_ = programs.cli_global_flags()
    i = 0
    global_args = []
    while i < len(args) and args[i].startswith("--"):
        name = args[i].split("=", 1)[0]
        takes = globals_.takes_value.get(name, False)
        global_args += args[i:i + (2 if takes and "=" not in args[i] else 1)]
        i += 2 if takes and "=" not in args[i] else 1
    values = check_flags(global_args, globals_, inv.where, report, prog, programs)
    rest = args[i:]
    commands = programs.cli_commands()
    if not rest:
        report.error(inv.where, "hypertune without a command")
        return [(prog, values)]
    if len(rest) > 1 and (rest[0], rest[1]) in commands:
        path = (rest[0], rest[1])
    elif (rest[0],) in commands:
        path = (rest[0],)
    else:
        report.error(inv.where, f"hypertune has no command {rest[0]!r} "
                                "(`hypertune --help` does not list it)")
        return [(prog, values)]
    after = rest[len(path):]
    program_argv = []
    if "--" in after:
        cut = after.index("--")
        after, program_argv = after[:cut], after[cut + 1:]
    flagset = programs.cli_command_flags(path)
    j = 0
    while j < len(after):
        token = after[j]
        if not token.startswith("--"):
            j += 1  # a positional argument (NAME, FILE)
            continue
        name = token.split("=", 1)[0]
        if name == "--help":
            j += 1
            continue
        if name not in flagset.takes_value:
            report.error(inv.where, f"hypertune {' '.join(path)} has no flag "
                                    f"{name} (`hypertune {' '.join(path)} --help` "
                                    "does not list it)")
            j += 1
            continue
        if flagset.takes_value[name] and "=" not in token:
            if j + 1 >= len(after):
                report.error(inv.where, f"hypertune {' '.join(path)}: {name} "
                                        "needs a value")
            values[name] = after[j + 1] if j + 1 < len(after) else None
            j += 2
        else:
            values[name] = token.split("=", 1)[1] if "=" in token else None
            j += 1
    if "--server" in values and values["--server"] is not None:
        p = planned_for(programs, "hypertune", "--server", values["--server"])
        if p:
            report.plan(p, inv.where, f"hypertune --server {values['--server']}")
    found = [(prog, values)]
    if program_argv and os.path.basename(program_argv[0]) in PROGRAMS:
        found += check_invocation(Invocation(inv.where, program_argv),
                                  programs, report)
    return found


def split_address(address: str):
    """HOST[:PORT] -> (host, port); the CLI's default port without one."""
    m = re.fullmatch(r"\[?([^\]]*?)\]?(?::(\d+))?", address)
    host, port = m.group(1), m.group(2)
    return host, int(port) if port else DEFAULT_GRPC_PORT


# --- YAML ----------------------------------------------------------------------

class YamlError(Exception):
    pass


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader (YAML 1.1, as Kubernetes reads manifests) that
    also refuses a key given twice (PyYAML keeps the last) and a plain
    scalar that YAML 1.2 reads otherwise (yes, on, 0755, 1:30), which wants
    quotes."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise YamlError(f"{_where(key_node)}: key {key!r} given twice")
            seen.add(key)
        return super().construct_mapping(node, deep)

    def _refuse_ambiguous(self, node):
        text = node.value
        if node.style is not None:
            return  # quoted
        tag = node.tag.rsplit(":", 1)[-1]
        if tag == "str":
            ambiguous = _AMBIGUOUS.fullmatch(text) is not None  # 1.1: y, n; 1.2: 1e5
        else:
            ambiguous = not ((tag == "bool" and text.lower() in ("true", "false"))
                             or (tag == "int" and re.fullmatch(r"[-+]?(0|[1-9]\d*)", text))
                             or (tag == "float" and re.fullmatch(r"[-+]?\d+\.\d+", text)))
        if ambiguous:
            raise YamlError(f"{_where(node)}: {text!r} reads differently in YAML 1.1 "
                            "and 1.2: quote it")

    def construct_yaml_str(self, node):
        self._refuse_ambiguous(node)
        return super().construct_yaml_str(node)

    def construct_yaml_bool(self, node):
        self._refuse_ambiguous(node)
        return super().construct_yaml_bool(node)

    def construct_yaml_int(self, node):
        self._refuse_ambiguous(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        self._refuse_ambiguous(node)
        return super().construct_yaml_float(node)


_AMBIGUOUS = re.compile(r"(?i)(y|n|yes|no|on|off)$|[-+]?0\d+$|[-+]?[\d.]+e[-+]?\d+$"
                        r"|[-+]?\.\d+$|[-+]?\d+\.$|\.(inf|nan)$")
_StrictLoader.add_constructor("tag:yaml.org,2002:str", _StrictLoader.construct_yaml_str)
_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _StrictLoader.construct_yaml_bool)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)


def _where(node) -> str:
    return f"{node.start_mark.name}:{node.start_mark.line + 1}"


def load_yaml(path: str) -> list:
    """The documents of the YAML file `path` (empty ones left out); YamlError
    says what and where when it is not YAML or _StrictLoader refuses it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        loader = _StrictLoader(text)
        loader.name = path
        try:
            documents = []
            while loader.check_data():
                documents.append(loader.get_data())
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        raise YamlError(f"{path}: {e}") from e
    return [d for d in documents if d is not None]


# --- Kubernetes -------------------------------------------------------------------

@dataclass
class Workload:
    obj: dict
    path: str

    @property
    def kind(self):
        return self.obj.get("kind")

    @property
    def name(self):
        return self.obj.get("metadata", {}).get("name")

    @property
    def pod(self):
        spec = self.obj.get("spec", {})
        if self.kind == "Pod":
            return spec
        template = spec.get("template", {})
        if self.kind == "CronJob":
            template = spec.get("jobTemplate", {}).get("spec", {}).get("template", {})
        return template.get("spec", {})

    @property
    def labels(self):
        spec = self.obj.get("spec", {})
        if self.kind == "Pod":
            return self.obj.get("metadata", {}).get("labels", {})
        return spec.get("template", {}).get("metadata", {}).get("labels", {})


WORKLOAD_KINDS = ("Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet",
                  "Job", "CronJob")


class Variant:
    """The manifests applied together: one setup folder and the shared ones."""

    def __init__(self, name, documents):
        self.name = name
        self.objects = documents  # [(path, obj)]

    def find(self, kind, name):
        for path, obj in self.objects:
            if obj.get("kind") == kind and obj.get("metadata", {}).get("name") == name:
                return obj
        return None

    def of_kind(self, *kinds):
        return [(p, o) for p, o in self.objects if o.get("kind") in kinds]

    def workloads(self):
        return [Workload(o, p) for p, o in self.of_kind(*WORKLOAD_KINDS)]


def k8s_variants(deploy_dir, report):
    """Setup folders (each with the manifests of the folders above it) or,
    without any, all manifests as one."""
    docs_by_dir = {}
    for root, _, files in os.walk(deploy_dir):
        for name in sorted(files):
            if name.endswith((".yaml", ".yml")):
                path = os.path.join(root, name)
                try:
                    docs = load_yaml(path)
                except YamlError as e:
                    report.error(shown(path, deploy_dir), str(e))
                    continue
                for d in docs:
                    if not isinstance(d, dict) or "kind" not in d:
                        report.error(shown(path, deploy_dir), "a document without kind")
                        continue
                    docs_by_dir.setdefault(root, []).append((shown(path, deploy_dir), d))
    leaves = [d for d in docs_by_dir
              if not any(o != d and o.startswith(d + os.sep) for o in docs_by_dir)]
    variants = []
    for leaf in sorted(leaves):
        objects = []
        for d, docs in docs_by_dir.items():
            if leaf == d or leaf.startswith(d + os.sep):
                objects += docs
        variants.append(Variant(shown(leaf, deploy_dir), objects))
    return variants


def rel(path, base):
    r = os.path.relpath(path, base)
    return "" if r == "." else r


def shown(path, deploy_dir):
    """`path` as reports show it: from the deploy folder's parent."""
    return os.path.relpath(path, os.path.dirname(os.path.abspath(deploy_dir)))


def expand_k8s(text, env):
    return re.sub(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: env.get(m.group(1), m.group(0)), text)


def container_env(container, variant, where, report):
    env = {}
    for e in container.get("env", []) or []:
        name = e.get("name")
        if "value" in e:
            env[name] = expand_k8s(str(e["value"]), env)
        ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
        if ref:
            cm = variant.find("ConfigMap", ref.get("name"))
            if cm is None or ref.get("key") not in (cm.get("data") or {}):
                report.error(where, f"env {name}: no ConfigMap {ref.get('name')} "
                                    f"with key {ref.get('key')} in {variant.name}")
            else:
                env[name] = str(cm["data"][ref["key"]])
    return env


def named_ports(container):
    ports = {}
    for p in container.get("ports", []) or []:
        ports[p.get("name") or str(p["containerPort"])] = p["containerPort"]
    return ports


def resolve_port(port, ports):
    """A probe's or Service's port (a name or number) -> the container port."""
    if isinstance(port, int):
        return port if port in ports.values() else None
    return ports.get(port)


@dataclass
class Server:
    """A container running hypertuned."""
    workload: Workload
    ports: dict      # container port name -> number
    values: dict     # hypertuned's flag -> value
    where: str


def check_variant(variant, programs, report, uid):
    """Checks one setup's manifests: each container, then the ports between
    servers, Services and clients."""
    servers, clients = [], []  # clients: (where, HOST:PORT[,HOST:PORT...])
    for w in variant.workloads():
        for kind in ("initContainers", "containers"):
            for c in w.pod.get(kind, []) or []:
                where = f"{w.path}: {w.kind} {w.name}, container {c.get('name')}"
                if not w.path.startswith(variant.name + os.sep):
                    where += f" (with {variant.name}/)"
                check_container(w, c, variant, programs, report, uid, where,
                                servers, clients)
    for server in servers:
        check_server_ports(server, report)
    services = check_services(variant, servers, report)
    grpc_ports = {server.ports.get("grpc") for server in servers}
    for where, value in clients:
        for address in value.split(","):
            check_client_address(address.strip(), services, grpc_ports, variant,
                                 where, report)


def check_container(w, c, variant, programs, report, uid, where, servers, clients):
    """Checks a container's command, probes and user; adds what it serves
    and where it connects to `servers` and `clients`."""
    if "command" not in c:
        if "hypertune" in str(c.get("image", "")):
            report.error(where, "give `command` (the program and its flags), so "
                                "that they are checked here")
        return
    env = container_env(c, variant, where, report)
    argv = [expand_k8s(str(a), env)
            for a in list(c.get("command") or []) + list(c.get("args") or [])]
    ports = named_ports(c)
    for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = c.get(probe_name) or {}
        for handler in ("tcpSocket", "httpGet", "grpc"):
            if handler in probe:
                port = probe[handler].get("port")
                if resolve_port(port, ports) is None:
                    report.error(where, f"{probe_name}: port {port} is none of "
                                        "the container's ports")
        if "grpc" in probe:
            p = planned_for(programs, os.path.basename(argv[0]), "probe:grpc", "")
            if p:
                report.plan(p, where, f"{probe_name} grpc port "
                                      f"{probe['grpc'].get('port')}")
    if "HYPERTUNE_SERVER" in env:
        value = env["HYPERTUNE_SERVER"]
        clients.append((where + ", env HYPERTUNE_SERVER", value))
        p = planned_for(programs, "hypertune", "env:HYPERTUNE_SERVER", value)
        if p:
            report.plan(p, where, "HYPERTUNE_SERVER=" + value)
    security = {**(w.pod.get("securityContext") or {}),
                **(c.get("securityContext") or {})}
    if uid is not None and security.get("runAsUser") not in (None, uid):
        report.error(where, f"runAsUser {security.get('runAsUser')} is not the "
                            f"image's USER {uid} (deploy/Dockerfile)")
    for prog, values in check_invocation(Invocation(where, argv), programs, report):
        if prog == "hypertuned":
            servers.append(Server(w, ports, values, where))
        if prog == "hypertune" and values.get("--server"):
            clients.append((where + ", --server", values["--server"]))
        if prog == "hypertune-train" and "--checkpoint_dir" in values:
            check_on_shared_volume(values["--checkpoint_dir"], c, w.pod, variant,
                                   where, report)


def check_server_ports(server, report):
    """--listen and --http: beyond loopback, and the container's ports named
    grpc and http, which name no other port."""
    expected = {}
    for flag, port_name in (("--listen", "grpc"), ("--http", "http")):
        address = server.values.get(flag)
        if flag == "--listen" and address is None:
            address = "127.0.0.1:50051"  # hypertuned's default
        if address is None:
            continue
        host, port = split_address(address)
        if host in ("127.0.0.1", "localhost", "::1"):
            report.error(server.where, f"{flag} {address}: loopback only, so no "
                                       "other pod reaches it (0.0.0.0)")
        expected[port_name] = port
        if server.ports.get(port_name) != port:
            report.error(server.where, f"{flag} {address}: the container port "
                                       f"named {port_name} is "
                                       f"{server.ports.get(port_name)}, not {port}")
    for name, number in server.ports.items():
        if expected.get(name) != number:
            report.error(server.where, f"container port {name} ({number}) is "
                                       "neither --listen's nor --http's port")


def check_services(variant, servers, report):
    """Each Service selects hypertuned pods and its targetPorts are theirs.
    Returns {name: (Service, {port: {container ports}}, [Server])}."""
    services = {}
    for path, svc in variant.of_kind("Service"):
        name = svc["metadata"]["name"]
        where = f"{path}: Service {name}"
        selector = (svc.get("spec") or {}).get("selector") or {}
        backends = [s for s in servers
                    if all(s.workload.labels.get(k) == v for k, v in selector.items())]
        if not backends:
            report.error(where, f"selects no hypertuned pod in {variant.name}")
            continue
        service_ports = {}
        for sp in svc["spec"].get("ports", []):
            target = sp.get("targetPort", sp["port"])
            for backend in backends:
                if resolve_port(target, backend.ports) is None:
                    report.error(where, f"port {sp['port']}: targetPort {target} "
                                        f"is none of {backend.where}'s ports")
            service_ports[sp["port"]] = {resolve_port(target, b.ports)
                                         for b in backends}
        services[name] = (svc, service_ports, backends)
    return services


def check_client_address(address, services, grpc_ports, variant, where, report):
    """HOST[:PORT] names a Service of the setup on a port that leads to
    hypertuned's gRPC port, or POD.SERVICE a StatefulSet's pod behind its
    headless Service, on the pods' gRPC port."""
    host, port = split_address(address)
    labels = host.split(".")
    svc_name = labels[1] if len(labels) > 1 and labels[1] in services else labels[0]
    if svc_name not in services:
        report.error(where, f"{address}: {host} names no Service of {variant.name}")
        return
    svc, service_ports, backends = services[svc_name]
    if svc_name == labels[0]:
        if port not in service_ports or not (service_ports[port] & grpc_ports):
            report.error(where, f"{address}: Service {svc_name} has no port {port} "
                                "leading to hypertuned's gRPC port")
        return
    sets = [b.workload for b in backends if b.workload.kind == "StatefulSet"
            and b.workload.obj["spec"].get("serviceName") == svc_name]
    m = re.fullmatch(r"(.+)-(\d+)", labels[0])
    if svc["spec"].get("clusterIP") != "None" or not sets or not m \
            or m.group(1) != sets[0].name \
            or int(m.group(2)) >= sets[0].obj["spec"].get("replicas", 1):
        report.error(where, f"{address}: {labels[0]} is no pod of a StatefulSet "
                            f"governed by the headless Service {svc_name}")
    if port not in grpc_ports:
        report.error(where, f"{address}: the pods serve gRPC on "
                            f"{sorted(p for p in grpc_ports if p)}")


def check_on_shared_volume(path, container, pod, variant, where, report):
    mounts = sorted((m for m in container.get("volumeMounts", []) or []
                     if path == m["mountPath"] or path.startswith(
                         m["mountPath"].rstrip("/") + "/")),
                    key=lambda m: len(m["mountPath"]))
    if not mounts:
        report.error(where, f"--checkpoint-dir {path} is on no volume: a trial "
                            "resumed in another pod would not find it")
        return
    volume = next((v for v in pod.get("volumes", []) or []
                   if v.get("name") == mounts[-1]["name"]), {})
    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    pvc = variant.find("PersistentVolumeClaim", claim) if claim else None
    if pvc is None or "ReadWriteMany" not in pvc["spec"].get("accessModes", []):
        report.error(where, f"--checkpoint-dir {path} is not on a ReadWriteMany "
                            "PersistentVolumeClaim of these manifests: a trial "
                            "resumed on another node would not find it")


# --- Dockerfile ------------------------------------------------------------------

def dockerfile_instructions(path):
    with open(path, encoding="utf-8") as f:
        logical, current = [], ""
        for raw in f:
            line = raw.rstrip("\n")
            if not current and line.lstrip().startswith("#"):
                continue
            if line.endswith("\\"):
                current += line[:-1] + " "
                continue
            current += line
            if current.strip():
                logical.append(current.strip())
            current = ""
    for line in logical:
        word, _, rest = line.partition(" ")
        yield word.upper(), rest.strip()


def check_dockerfile(path, deploy_dir, programs, report):
    where = shown(path, deploy_dir)
    exposed, server_ports, uid = set(), None, None
    for word, rest in dockerfile_instructions(path):
        if word == "EXPOSE":
            exposed |= {int(p.split("/")[0]) for p in rest.split()}
        elif word == "USER":
            user = rest.split(":")[0]
            uid = int(user) if user.isdigit() else None
            if user in ("0", "root"):
                continue
        elif word in ("CMD", "ENTRYPOINT"):
            try:
                argv = json.loads(rest)
            except json.JSONDecodeError:
                report.error(where, f"{word} {rest}: use the exec form "
                                    "[\"program\", \"flag\", ...]")
                continue
            found = check_invocation(Invocation(f"{where}: {word}", argv),
                                     programs, report)
            for prog, values in found:
                if prog == "hypertuned":
                    server_ports = set()
                    for flag in ("--listen", "--http"):
                        if values.get(flag):
                            host, port = split_address(values[flag])
                            server_ports.add(port)
                            if host in ("127.0.0.1", "localhost", "::1"):
                                report.error(where, f"{flag} {values[flag]}: "
                                                    "loopback only inside a container")
    if server_ports is not None and server_ports != exposed:
        report.error(where, f"EXPOSE {sorted(exposed)} but hypertuned's CMD "
                            f"serves {sorted(server_ports)}")
    if uid is None:
        report.error(where, "the image runs as root: give a numeric USER")
    return uid


# --- systemd ---------------------------------------------------------------------

def unit_entries(path):
    entries, section, current = [], None, ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not current and (not line.strip() or line.lstrip()[0] in "#;"):
                continue
            if line.endswith("\\"):
                current += line[:-1] + " "
                continue
            line, current = current + line, ""
            if line.startswith("["):
                section = line.strip("[] ")
                continue
            key, _, value = line.partition("=")
            entries.append((section, key.strip(), value.strip()))
    return entries


def environment_file_variants(unit_path, env_file):
    """The variable settings of a unit's EnvironmentFile as shipped beside it
    (/etc/default/NAME as NAME.default): the active one and each commented
    example, as dicts."""
    shipped = os.path.join(os.path.dirname(unit_path),
                           os.path.basename(env_file.lstrip("-")) + ".default")
    if not os.path.exists(shipped):
        return shipped, [{}]
    variants = []
    with open(shipped, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^#?\s*([A-Z_][A-Z0-9_]*)=(.*)$", line.strip())
            if m:
                value = shlex.split(m.group(2))
                variants.append({m.group(1): value[0] if value else ""})
    return shipped, variants or [{}]


def check_unit(path, deploy_dir, programs, report):
    where = shown(path, deploy_dir)
    entries = unit_entries(path)
    service = {}
    for section, key, value in entries:
        if section == "Service":
            service.setdefault(key, []).append(value)
    env_files = service.get("EnvironmentFile", [])
    state_dirs = " ".join(service.get("StateDirectory", [])).split()
    credentials = {c.split(":")[0] for c in service.get("LoadCredential", [])}
    for exec_line in service.get("ExecStart", []):
        command = exec_line.lstrip("-@+!:")
        settings = [{}]
        shipped = None
        for env_file in env_files:
            shipped, settings = environment_file_variants(path, env_file)
        for env in settings:
            argv = []
            for word in shlex.split(command):
                m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
                if m:
                    argv += shlex.split(env.get(m.group(1), ""))
                else:
                    argv.append(word)
            label = f"{where}: ExecStart"
            if env and any(env.values()):
                label += f" with {shown(shipped, deploy_dir)}'s " + \
                    ", ".join(f"{k}={v!r}" for k, v in env.items())
            for prog, values in check_invocation(Invocation(label, argv),
                                                 programs, report):
                if prog != "hypertuned":
                    continue
                db = values.get("--db") or ""
                if not any(db.startswith(f"%S/{d}/") for d in state_dirs):
                    report.error(label, f"--db {db} is not under the StateDirectory "
                                        f"(%S/{'|'.join(state_dirs) or '?'}/), the "
                                        "one place ProtectSystem=strict lets it write")
                token = values.get("--auth-token-file")
                if token and token.startswith("%d/") and \
                        token[3:] not in credentials:
                    report.error(label, f"--auth-token-file {token}: no "
                                        f"LoadCredential={token[3:]}:...")


# --- README ---------------------------------------------------------------------

def check_readme(path, deploy_dir, programs, report):
    """The command lines of the README's ```sh blocks that start with one of
    the programs."""
    where = shown(path, deploy_dir)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            try:
                words = shlex.split(line, comments=True)
            except ValueError as e:
                report.error(where, f"{line!r}: {e}")
                continue
            if words and words[0] in PROGRAMS:
                check_invocation(Invocation(f"{where}: sh", words), programs, report)


# --- Main ------------------------------------------------------------------------

def run_checks(args):
    programs = Programs({"hypertuned": args.hypertuned, "hypertune": args.hypertune,
                         "hypertune-train": args.hypertune_train})
    report = Report()
    deploy_dir = args.deploy_dir
    uid = None
    for root, _, files in sorted(os.walk(deploy_dir)):
        for name in sorted(files):
            path = os.path.join(root, name)
            if name in ("Dockerfile", "Containerfile") or \
                    (name.startswith("Dockerfile.") and not name.endswith(".dockerignore")):
                uid = check_dockerfile(path, deploy_dir, programs, report) or uid
            elif name.endswith(".service"):
                check_unit(path, deploy_dir, programs, report)
            elif name == "README.md":
                check_readme(path, deploy_dir, programs, report)
    for variant in k8s_variants(deploy_dir, report):
        check_variant(variant, programs, report, uid)
    return programs, report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hypertuned", required=True)
    parser.add_argument("--hypertune", required=True)
    parser.add_argument("--hypertune-train", required=True)
    parser.add_argument("--deploy-dir", required=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--planned", action="store_true",
                      help="report the planned uses: exit 77 while any remain")
    mode.add_argument("--expect-error", metavar="TEXT",
                      help="pass only if the checks fail with an error containing TEXT")
    parser.add_argument("--break", dest="breakage", nargs=3,
                        metavar=("FILE", "OLD", "NEW"),
                        help="check a copy of the deploy folder whose FILE has its "
                             "first OLD replaced by NEW (with --expect-error)")
    args = parser.parse_args()
    if args.breakage:
        if args.expect_error is None:
            parser.error("--break goes with --expect-error")
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, os.path.basename(os.path.abspath(args.deploy_dir)))
            shutil.copytree(args.deploy_dir, copy)
            target = os.path.join(copy, args.breakage[0])
            with open(target, encoding="utf-8") as f:
                text = f.read()
            old, new = args.breakage[1], args.breakage[2]
            if old not in text:
                print(f"FAIL: {args.breakage[0]} no longer holds {old!r}: update "
                      "this test's --break")
                return 1
            with open(target, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
            print(f"{args.breakage[0]}: {old!r} -> {new!r}")
            args.deploy_dir = copy
            programs, report = run_checks(args)
    else:
        programs, report = run_checks(args)

    if args.expect_error is not None:
        for line in report.errors:
            print(f"error (expected here): {line}")
        if any(args.expect_error in line for line in report.errors):
            print(f"ok: the check fails as it should ({args.expect_error!r})")
            return 0
        print(f"FAIL: no error containing {args.expect_error!r}")
        return 1

    if args.planned:
        if not report.planned:
            gone = [p.what for p in PLANNED if p.present(programs)]
            print("No planned uses remain: every feature the manifests use is in "
                  "the programs.")
            if gone:
                print("Now present, to drop from PLANNED in check_deploy.py: "
                      + "; ".join(gone))
            return 0
        print("Planned, not in the programs yet (these uses cannot run with this "
              "build):")
        for planned, where, use in report.planned:
            print(f"  {where}: {use}\n    {planned.what}: {planned.issue}; "
                  f"{planned.why_absent}")
        return 77

    if not report.checked:
        report.error(os.path.basename(os.path.abspath(args.deploy_dir)), "no command line of hypertuned, "
                     "hypertune or hypertune-train found")
    for line in report.checked:
        print(f"checked  {line}")
    for planned, where, use in report.planned:
        print(f"PLANNED  {where}: {use} ({planned.what}: {planned.issue}; not in "
              "this build, see the deploy_planned test)")
    for line in report.errors:
        print(f"ERROR    {line}")
    print(f"deploy: {len(report.checked)} command lines checked, "
          f"{len(report.planned)} planned uses, {len(report.errors)} errors")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
