#!/usr/bin/env python3
"""README.md's commands, run exactly as written, twice in a row.

The commands are read from README.md itself (and from what `make demo`
prints), never copied here, so that the check fails as soon as README.md
drifts from what works. Each of the two rounds starts from a fresh folder
with a clean server, laid out as a checkout after `make demo`: build/bin and
build/python (links to the build's), examples/ (a link to the source's).

1. The first block, `make demo` and `make test`. `make demo` installs
   what is missing, configures, builds the demo's programs and then runs
   examples/demo.sh on the build; here the programs are built already (this
   runs inside the suite), so the check asserts that the Makefile's demo
   recipe ends in examples/demo.sh and runs that script itself on the
   build, rather than rebuilding and reconfiguring the build under test.
   While the demo's study runs, its dashboard address (which the demo
   prints) must serve the dashboard; afterwards every command the demo
   prints is run, the server it prints started as printed, the address it
   says to open fetched. `make test` is this suite: not run again.
2. "Python in ten lines": hypertuned started as the text before the block
   says (`build/bin/hypertuned --db studies.db`), the block run twice by
   Debian's python3 with the client on PYTHONPATH=build/python, as the text
   says; it must print the best trial, whose value is (x - 1)^2 of its x,
   the same both times (the second run loads the finished study).
3. "From the command line": the block, line by line, in a fresh folder.
4. "The dashboard": the block in that folder, once its server is stopped;
   every address its comments say to open is fetched: the page must be the
   dashboard, and a #study=NAME must name a study the server has.

A line that ends in `&` starts a server: it is run without the `&` (job
control only) and the next line waits until the server prints that it
listens, as a reader would before typing on. Every other line must exit 0.

The README's addresses are fixed (127.0.0.1:50051, :8080): where Linux lets
an unprivileged user have a network namespace (unshare -rn), the check runs
in one of its own so that no other server or test can hold those ports;
elsewhere it runs in the machine's and says so, failing if a port is taken.

With --break OLD NEW --expect-error TEXT, README.md with OLD replaced by NEW
must fail, saying TEXT: the check catches a README that drifts.

Usage: check_readme.py --source-dir ROOT --build-dir BUILD [--python PYTHON]
           [--break OLD NEW --expect-error TEXT]
"""

import argparse
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

TIMEOUT = 300  # seconds for one command (the demo's study takes about 15)
IN_NAMESPACE = "HYPERTUNE_README_CHECK_NETNS"


class Failure(Exception):
    """A README command failed; the message says which and why."""


# ----- Reading README.md -----

def sections(readme):
    """{heading: [(language, code, text before the block)]} for README.md's
    fenced blocks; the text before the first heading is under ''."""
    result = {}
    heading = ""
    text = []
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            heading = line[3:].strip()
            text = []
        elif line.startswith("```"):
            language = line[3:].strip()
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            code = "\n".join(lines[i + 1:end]) + "\n"
            result.setdefault(heading, []).append((language, code, "\n".join(text)))
            text = []
            i = end
        else:
            text.append(line)
        i += 1
    return result


def block(found, heading, language):
    """The one block of `language` under `heading`."""
    blocks = [b for b in found.get(heading, []) if b[0] == language]
    if len(blocks) != 1:
        where = f"under '## {heading}'" if heading else "before the first heading"
        raise Failure(f"README.md has {len(blocks)} ```{language} blocks {where}, "
                      "expected one")
    return blocks[0]


def command_lines(code):
    """The block's commands: its lines without blank and comment-only ones."""
    return [line for line in code.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def addresses(text):
    """The http:// addresses in `text` (its comments, its prose)."""
    return re.findall(r"http://[^\s)\"'`]+", text)


# ----- Running commands -----

class Servers:
    """The servers the commands started (a `... &` line), stopped at the end
    of each part."""

    def __init__(self):
        self.running = []

    def start(self, line, cwd, env):
        command = line.rstrip()
        assert command.endswith("&")
        command = command[:-1].rstrip()
        log_path = os.path.join(cwd, f"server-{len(self.running)}.log")
        with open(log_path, "w") as log:
            process = subprocess.Popen(["bash", "-c", "exec " + command], cwd=cwd,
                                       env=env, stdout=log, stderr=subprocess.STDOUT)
        self.running.append(process)
        wants_http = "--http" in shlex.split(command, comments=True)
        # What a reader waits for before the next line: the server saying it
        # listens (bounded; polled, as the server prints no other signal).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(log_path) as f:
                out = f.read()
            if "listening on" in out and (not wants_http or "dashboard on" in out):
                return out
            if process.poll() is not None:
                raise Failure(f"`{line}` exited ({process.returncode}) before it "
                              f"listened:\n{out}")
            time.sleep(0.05)
        raise Failure(f"`{line}` did not say it listens within 60 s:\n{out}")

    def stop(self):
        for process in self.running:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise Failure(f"{process.args} did not stop within 30 s of SIGTERM")
        self.running = []


def run_line(line, cwd, env, servers):
    """Runs one README line; returns its stdout."""
    if line.rstrip().endswith("&"):
        return servers.start(line, cwd, env)
    result = subprocess.run(["bash", "-c", line], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT)
    if result.returncode != 0:
        raise Failure(f"`{line}` exited {result.returncode}:\n{result.stdout}"
                      f"{result.stderr}")
    print(f"  ok: {line}")
    return result.stdout


def fetch(url):
    """GETs url (its #fragment is the browser's); returns (type, body)."""
    try:
        with urllib.request.urlopen(url.split("#")[0], timeout=30) as response:
            return response.headers.get("Content-Type", ""), response.read().decode()
    except (urllib.error.URLError, OSError) as error:
        raise Failure(f"opening {url}: {error}") from error


def check_open(url, study_made=True):
    """What a reader sees opening `url`: the dashboard, and (once made) the
    study that a #study=NAME names, which the server must have."""
    kind, page = fetch(url)
    if "text/html" not in kind or "<html" not in page.lower():
        raise Failure(f"{url} is not the dashboard: {kind}\n{page[:300]}")
    match = re.search(r"#study=([^&\s]+)", url)
    if match and study_made:
        base = url.split("#")[0].rstrip("/")
        _, body = fetch(f"{base}/api/studies/{match.group(1)}")
        study = json.loads(body)
        if match.group(1) not in json.dumps(study):
            raise Failure(f"{url}: the server's study is {body[:300]}")
    print(f"  ok: opened {url}")


# ----- The parts -----

def check_demo(found, args, cwd, env, servers):
    """1. The first block: `make demo` as examples/demo.sh on the build."""
    _, code, _ = block(found, "", "sh")
    commands = [shlex.split(line, comments=True) for line in command_lines(code)]
    if commands != [["make", "demo"], ["make", "test"]]:
        raise Failure(f"README.md's first block is {commands}, not make demo and "
                      "make test: teach check_readme.py the new commands")
    with open(os.path.join(args.source_dir, "Makefile")) as f:
        recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", f.read(), re.M)
    if not recipe or not re.search(r"^\t@?examples/demo\.sh \$\(BUILD\)\s*$",
                                   recipe.group(1), re.M):
        raise Failure("the Makefile's demo recipe does not end in "
                      "`examples/demo.sh $(BUILD)`: teach check_readme.py what "
                      "make demo runs now")

    demo = subprocess.Popen(["examples/demo.sh", "build"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    out = []
    live = None
    deadline = time.monotonic() + TIMEOUT
    for line in demo.stdout:
        out.append(line)
        match = re.search(r"the dashboard.*: (http://\S+)", line)
        if match and live is None:
            # Opened as the demo invites, while its server is up (the study
            # is made after this line: the page shows it once it is).
            live = match.group(1)
            check_open(live, study_made=False)
        if time.monotonic() > deadline:
            demo.kill()
            break
    if demo.wait() != 0 or live is None:
        raise Failure(f"make demo (examples/demo.sh build) exited "
                      f"{demo.returncode}{'' if live else ', printing no dashboard address'}:"
                      f"\n{''.join(out)}")
    print("  ok: make demo (examples/demo.sh build)")
    printed = "".join(out)
    # What the demo tells the reader to do afterwards: its indented commands,
    # and the address to open once the server it prints is up.
    after = printed.split("The study's history is in", 1)
    if len(after) != 2:
        raise Failure(f"make demo printed no closing instructions:\n{printed}")
    lines = [line.strip() for line in after[1].splitlines()
             if line.startswith("  ") and line.strip()]
    if not lines:
        raise Failure(f"make demo printed no commands to run:\n{printed}")
    opens = [a for a in addresses(after[1]) if a not in " ".join(lines)]
    for line in lines:
        run_line(line, cwd, env, servers)
        if line.endswith("&"):
            for url in opens:
                check_open(url)
    servers.stop()


def check_python(found, args, cwd, env, servers):
    """2. Python in ten lines, twice, against the server the text names."""
    _, code, text = block(found, "Python in ten lines", "python")
    inline = re.findall(r"`([^`]+)`", text)
    server = [c for c in inline if c.startswith("build/bin/hypertuned ")]
    path = [c for c in inline if c.startswith("PYTHONPATH=")]
    if not server or not path:
        raise Failure("the text before README.md's Python block no longer names "
                      "the server to start (`build/bin/hypertuned ...`) and the "
                      f"PYTHONPATH=...: {inline}")
    run_line(server[0] + " &", cwd, env, servers)
    python_env = dict(env, PYTHONPATH=path[0].split("=", 1)[1])
    printed = []
    for attempt in (1, 2):
        result = subprocess.run([args.python, "-"], input=code, cwd=cwd,
                                env=python_env, capture_output=True, text=True,
                                timeout=TIMEOUT)
        if result.returncode != 0:
            raise Failure(f"README.md's Python lines (run {attempt}) exited "
                          f"{result.returncode}:\n{result.stdout}{result.stderr}")
        match = re.fullmatch(r"best: (\S+) \{'x': (\S+)\}\n", result.stdout)
        if not match:
            raise Failure(f"README.md's Python lines (run {attempt}) printed "
                          f"{result.stdout!r}, not 'best: VALUE {{'x': X}}'")
        value, x = float(match.group(1)), float(match.group(2))
        if not -5 <= x <= 5 or abs(value - (x - 1) ** 2) > 1e-9:
            raise Failure(f"the best trial's value {value} is not (x - 1)^2 of "
                          f"its x = {x} in [-5, 5]")
        printed.append(result.stdout)
        print(f"  ok: the Python lines (run {attempt}): {result.stdout.strip()}")
    if printed[0] != printed[1]:
        raise Failure(f"the second run of the Python lines printed {printed[1]!r}, "
                      f"the first {printed[0]!r}: if_exists='load' should find "
                      "the finished study")
    servers.stop()


def check_cli(found, cwd, env, servers):
    """3. and 4. The command-line block, then the dashboard's on its file."""
    _, code, _ = block(found, "From the command line", "sh")
    outputs = [run_line(line, cwd, env, servers) for line in command_lines(code)]
    if not outputs[-1].strip():
        raise Failure(f"`{command_lines(code)[-1]}` printed nothing")
    servers.stop()

    _, code, _ = block(found, "The dashboard", "sh")
    for line in command_lines(code):
        run_line(line, cwd, env, servers)
    urls = addresses(code)
    if not urls:
        raise Failure("README.md's dashboard block says no address to open")
    for url in urls:
        check_open(url)
    servers.stop()


def fresh_folder(root, name, args):
    """A folder laid out as a checkout after `make demo`."""
    folder = os.path.join(root, name)
    os.makedirs(os.path.join(folder, "build"))
    for part in ("bin", "python"):
        os.symlink(os.path.join(args.build_dir, part), os.path.join(folder, "build", part))
    os.symlink(os.path.join(args.source_dir, "examples"), os.path.join(folder, "examples"))
    return folder


def check(args, root):
    with open(os.path.join(args.source_dir, "README.md")) as f:
        readme = f.read()
    if args.break_:
        old, new = args.break_
        if old not in readme:
            raise Failure(f"--break: README.md has no {old!r}")
        readme = readme.replace(old, new)
    found = sections(readme)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HYPERTUNE_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    servers = Servers()
    try:
        for round_ in (1, 2):
            print(f"round {round_}:")
            check_demo(found, args, fresh_folder(root, f"demo-{round_}", args), env,
                       servers)
            check_python(found, args, fresh_folder(root, f"python-{round_}", args),
                         env, servers)
            check_cli(found, fresh_folder(root, f"cli-{round_}", args), env, servers)
    finally:
        try:
            servers.stop()
        except Failure:
            pass


# ----- The network namespace -----

def loopback_up():
    """Brings up lo in a fresh network namespace (ip link set lo up)."""
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def in_own_namespace():
    """Re-runs this check in a network namespace of its own where unshare
    allows one; returns its exit status, or None to run here."""
    if os.environ.get(IN_NAMESPACE) or not shutil.which("unshare"):
        return None
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True)
    if probe.returncode != 0:
        print("note: no network namespace of its own (unshare -rn: "
              f"{probe.stderr.decode().strip()}); the README's ports are the "
              "machine's")
        return None
    env = dict(os.environ, **{IN_NAMESPACE: "1"})
    return subprocess.run(["unshare", "-rn", sys.executable] + sys.argv,
                          env=env).returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the python3 that runs the README's Python lines")
    parser.add_argument("--break", dest="break_", nargs=2, metavar=("OLD", "NEW"))
    parser.add_argument("--expect-error")
    args = parser.parse_args()
    args.source_dir = os.path.abspath(args.source_dir)
    args.build_dir = os.path.abspath(args.build_dir)

    status = in_own_namespace()
    if status is not None:
        return status
    if os.environ.get(IN_NAMESPACE):
        loopback_up()
        print("note: in a network namespace of its own")
    error = None
    with tempfile.TemporaryDirectory(prefix="hypertune-readme-") as root:
        try:
            check(args, root)
        except Failure as failure:
            error = str(failure)
        except subprocess.TimeoutExpired as timeout:
            error = f"`{timeout.cmd}` took more than {timeout.timeout} s"
    if args.break_:
        if error is None or args.expect_error not in error:
            print(f"FAIL: README.md broken by --break {args.break_} should fail "
                  f"saying {args.expect_error!r}; "
                  f"{'it passed' if error is None else 'it said: ' + error}")
            return 1
        print(f"ok: the broken README.md fails: {error.splitlines()[0]}")
        return 0
    if error is not None:
        print(f"FAIL: {error}")
        return 1
    print("ok: README.md's commands ran as written, twice")
    return 0


if __name__ == "__main__":
    sys.exit(main())
