"""Images for a Docker engine that reaches no registry, built from what this machine can install.

* a Debian bookworm base: ``debootstrap --variant=minbase`` imported with ``docker import``;
* a stand-in for ``python:3.11-slim``: Debian's Python 3.11 and pip, with a wheelhouse of the project's
  dependencies built here (``pip wheel``), since a container cannot reach a package index;
* ZooKeeper: the server jars the local runner uses (``zkserver.zookeeper_jars.resolve_classpath``) and
  Debian's JRE, behind an entrypoint that reads the official image's ``ZOO_*`` variables;
* Prometheus: Debian's package;
* the project's image, from its own Dockerfile with ``PYTHON_IMAGE`` set to the stand-in.

Debian packages come from the host's ``apt-get`` (resolved against the base's dpkg status, so only
what the base lacks is fetched) and every build runs with ``--network none``. Caches live in
``.run/docker``; each is reused only when the inputs recorded beside it are the same, and Docker's own
layer cache does the rest. ``python -m deploy.images`` builds them and prints the variables that point
docker-compose.yml at them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from deploy.engine import EngineError, docker, run

__all__ = [
    "DEFAULT_CACHE",
    "LocalImages",
    "build_all",
    "build_base",
    "build_wheelhouse",
    "deb_packages",
    "project_requirements",
    "zookeeper_jars",
]

REPO = Path(__file__).resolve().parents[1]
DOCKERFILES = REPO / "deploy" / "docker"
DEFAULT_CACHE = REPO / ".run" / "docker"
PREFIX = "kafka-zk-control-plane-local"
"""Repository prefix of every local image: never a name a registry serves."""
CONTROL_PLANE_IMAGE = "kafka-zk-control-plane:local"
SUITE = "bookworm"
MIRROR = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
INPUTS_LABEL = "org.kafka-zk-control-plane.inputs"
LOCAL_LABEL = "org.kafka-zk-control-plane.local=true"
"""On every image built here, and on nothing else: what :func:`prune_superseded` may remove."""
BASE_RECIPE_VERSION = 1
"""Raise when the base's preparation (:func:`_prepare_rootfs`) changes, so cached bases are rebuilt."""

IMAGE_PACKAGES: Mapping[str, tuple[str, ...]] = {
    "python": ("python3", "python3-pip", "python-is-python3"),
    "zookeeper": ("openjdk-17-jre-headless", "netcat-openbsd"),
    "prometheus": ("prometheus", "wget"),
}
"""Debian packages each image adds to the base (netcat and wget: the compose healthchecks use them)."""

ZOOKEEPER_JAR_PREFIXES = (
    "zookeeper-",
    "audience-annotations-",
    "commons-cli-",
    "commons-io-",
    "netty-",
    "slf4j-api-",
    "log4j-api-",
    "log4j-core-",
    "log4j-slf4j2-impl-",
    "logback-",
    "metrics-core-",
    "snappy-java-",
)
"""What the server needs from a directory of jars (pyspark's holds all of Spark's): the server and its
jute, netty (TLS and epoll), a logging backend, and the optional snapshot compression."""
_PLATFORM_JAR = re.compile(r"-(linux|osx|windows)-[A-Za-z0-9_]+\.jar$")
_JAVA_ARCH = {"x86_64": "x86_64", "aarch64": "aarch_64", "arm64": "aarch_64"}
_INST = re.compile(r"^Inst (?P<name>\S+) (?:\[[^]]*\] )?\((?P<version>\S+) .*\[(?P<arch>[^]]+)\]\)")


@dataclass(frozen=True)
class LocalImages:
    """The local images, by name."""

    base: str
    python: str
    zookeeper: str
    prometheus: str
    control_plane: str

    def compose_environment(self) -> dict[str, str]:
        """The variables that point docker-compose.yml at these images (Grafana has no local image)."""
        return {
            "ZOOKEEPER_IMAGE": self.zookeeper,
            "PROMETHEUS_IMAGE": self.prometheus,
            "PYTHON_IMAGE": self.python,
            "CONTROL_PLANE_IMAGE": self.control_plane,
        }


# ---------------------------------------------------------------- inputs and cache keys


def digest(inputs: object) -> str:
    """A short, stable hash of JSON-able inputs."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def image_inputs(image: str) -> str | None:
    """The inputs label of a local image, or None when the image is absent."""
    result = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image, check=False)
    if result.returncode != 0:
        return None
    labels = json.loads(result.stdout) or {}
    return str(labels.get(INPUTS_LABEL, ""))


def debian_arch() -> str:
    return run(["dpkg", "--print-architecture"]).stdout.strip()


# ---------------------------------------------------------------- the Debian base


def build_base(cache: Path) -> str:
    """The Debian base image: reused when its inputs label matches, else debootstrapped and imported.

    debootstrap keeps the packages it fetched in ``cache/apt``, so a rebuild downloads nothing.
    """
    arch = debian_arch()
    name = f"{PREFIX}/debian:{SUITE}"
    inputs = digest(
        {"suite": SUITE, "variant": "minbase", "mirror": MIRROR, "arch": arch, "recipe": BASE_RECIPE_VERSION}
    )
    if image_inputs(name) == inputs:
        return name
    archives = cache / "apt"
    rootfs = cache / "rootfs"
    archives.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(rootfs, ignore_errors=True)
    try:
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--arch={arch}",
                f"--cache-dir={archives}",
                SUITE,
                str(rootfs),
                MIRROR,
            ],
            timeout=900,
        )
        _prepare_rootfs(rootfs)
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE
        )
        assert tar.stdout is not None
        imported = subprocess.run(
            [
                "docker",
                "import",
                "--change",
                f"LABEL {INPUTS_LABEL}={inputs}",
                "--change",
                'CMD ["bash"]',
                "-",
                name,
            ],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            timeout=600,
        )
        tar.stdout.close()
        if tar.wait() != 0 or imported.returncode != 0:
            raise EngineError(f"docker import of {rootfs} failed: {imported.stderr[-2000:]}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return name


def _prepare_rootfs(rootfs: Path) -> None:
    """What an image needs that a chroot does not: no services started by package scripts, no apt
    lists or caches (the images install packages from files the host fetched)."""
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\n# No services start inside an image build.\nexit 101\n")
    policy.chmod(0o755)
    for leftovers in (rootfs / "var/lib/apt/lists", rootfs / "var/cache/apt/archives"):
        for path in leftovers.glob("*"):
            if path.is_file():
                path.unlink()


def base_dpkg_status(base: str, cache: Path) -> Path:
    """The base's dpkg status file, which apt-get resolves the other images' packages against."""
    image_id = docker("image", "inspect", "--format", "{{.Id}}", base).stdout.strip().split(":")[-1]
    status = cache / "status" / f"{image_id[:16]}.dpkg-status"
    if not status.is_file():
        status.parent.mkdir(parents=True, exist_ok=True)
        text = docker("run", "--rm", "--network", "none", base, "cat", "/var/lib/dpkg/status").stdout
        status.write_text(text)
    return status


# ---------------------------------------------------------------- Debian packages for the images


def deb_filename(name: str, version: str, arch: str) -> str:
    """The file name apt-get gives a downloaded package (an epoch's colon is escaped)."""
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


def parse_simulation(output: str) -> list[str]:
    """The file names of the packages an ``apt-get -s install`` would install."""
    return [
        deb_filename(m["name"], m["version"], m["arch"])
        for line in output.splitlines()
        if (m := _INST.match(line))
    ]


def deb_packages(packages: Sequence[str], status: Path, archives: Path) -> list[Path]:
    """Fetch ``packages`` and what they need beyond the base (``status``) into ``archives``; the files.

    The host's package lists are used as they are, and refreshed once if a fetch fails (they can name
    versions the mirror has replaced). A resolution is remembered until the lists or the base change.
    """
    remembered = archives / "resolved" / f"{digest([*packages, status.name, _package_lists()])}.json"
    if remembered.is_file():
        files = [archives / name for name in json.loads(remembered.read_text())]
        if all(f.is_file() for f in files):
            return files
    files = _fetch_debs(packages, status, archives)
    remembered.parent.mkdir(parents=True, exist_ok=True)
    remembered.write_text(json.dumps([f.name for f in files]))
    return files


def _package_lists(lists: Path = Path("/var/lib/apt/lists")) -> list[tuple[str, int]]:
    """The host's package lists by name and modification time: they change with every apt-get update."""
    return sorted((p.name, p.stat().st_mtime_ns) for p in lists.glob("*") if p.is_file())


def _fetch_debs(packages: Sequence[str], status: Path, archives: Path) -> list[Path]:
    """Resolve and download; if that fails (lists missing, or naming replaced versions), refresh the
    host's package lists and try once more."""
    (archives / "partial").mkdir(parents=True, exist_ok=True)
    options = ["-q", "-y", "--no-install-recommends", "-o", f"Dir::State::status={status}"]
    options += ["-o", f"Dir::Cache::archives={archives}"]
    env = {"DEBIAN_FRONTEND": "noninteractive"}

    def resolve_and_fetch() -> str:
        simulated = run(["apt-get", *options, "-s", "install", *packages], env=env).stdout
        run(["apt-get", *options, "--download-only", "install", *packages], env=env)
        return simulated

    try:
        simulated = resolve_and_fetch()
    except EngineError:
        run(["apt-get", "-q", "update"], env=env)
        simulated = resolve_and_fetch()
    files = [archives / name for name in parse_simulation(simulated)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise EngineError(f"apt-get fetched {packages} but these files are not in {archives}: {missing}")
    return files


# ---------------------------------------------------------------- the wheelhouse


def project_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """What the project's image installs: its build backend, its dependencies and the ``cli`` extra."""
    project = tomllib.loads(pyproject.read_text())
    return [
        *project["build-system"]["requires"],
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["cli"],
    ]


def build_wheelhouse(cache: Path) -> Path:
    """Wheels of :func:`project_requirements` for the images' Python, built with this interpreter.

    Debian bookworm's Python is 3.11, so the wheels must be too; the directory is rebuilt whenever the
    requirements, the interpreter's version or the machine change.
    """
    if sys.version_info[:2] != (3, 11):
        raise EngineError(
            f"the wheelhouse must be built with Python 3.11 (Debian bookworm's), not {sys.version}"
        )
    wheels = cache / "wheels"
    requirements = project_requirements()
    inputs = digest({"requirements": requirements, "python": "3.11", "machine": platform.machine()})
    stamp = wheels / ".inputs"
    if stamp.is_file() and stamp.read_text() == inputs:
        return wheels
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheels), *requirements], timeout=900)
    stamp.write_text(inputs)
    return wheels


# ---------------------------------------------------------------- ZooKeeper's jars


def zookeeper_jars(entries: Iterable[str], machine: str | None = None) -> list[Path]:
    """The jars a ZooKeeper server needs, from a ``java -cp`` classpath as ``resolve_classpath`` gives it.

    A ``DIR/*`` entry (pyspark's jars, a release's ``lib``) gives the jars named by
    :data:`ZOOKEEPER_JAR_PREFIXES`, native ones for this machine only; a jar file gives itself and the
    jars of its manifest's ``Class-Path`` (Debian's ``zookeeper.jar`` names its dependencies there).
    """
    java_arch = _JAVA_ARCH.get(machine or platform.machine(), machine or platform.machine())
    jars: dict[str, Path] = {}
    for entry in entries:
        if entry.endswith("*"):
            for jar in sorted(Path(entry[:-1]).glob("*.jar")):
                if jar.name.startswith(ZOOKEEPER_JAR_PREFIXES) and _for_this_machine(jar.name, java_arch):
                    jars.setdefault(jar.name, jar)
        elif Path(entry).is_file():
            for jar in [Path(entry), *_manifest_class_path(Path(entry))]:
                jars.setdefault(jar.name, jar)
    return list(jars.values())


def _for_this_machine(name: str, java_arch: str) -> bool:
    return _PLATFORM_JAR.search(name) is None or name.endswith(f"-linux-{java_arch}.jar")


def _manifest_class_path(jar: Path) -> list[Path]:
    """The existing jars that ``jar``'s manifest names in ``Class-Path`` (relative to ``jar``'s folder)."""
    with zipfile.ZipFile(jar) as archive:
        try:
            manifest = archive.read("META-INF/MANIFEST.MF").decode()
        except KeyError:
            return []
    unfolded = re.sub(r"\r?\n ", "", manifest)
    for line in unfolded.splitlines():
        if line.startswith("Class-Path:"):
            paths = [jar.parent / name for name in line.split(":", 1)[1].split()]
            return [p for p in paths if p.is_file()]
    return []


def zookeeper_version(jars: Sequence[Path]) -> str:
    """The server's version, read from its jar's name (``zookeeper-3.9.5.jar``) or manifest."""
    for jar in jars:
        if m := re.fullmatch(r"zookeeper-(\d+\.\d+\.\d+)\.jar", jar.name):
            return m[1]
    for jar in jars:
        if jar.name == "zookeeper.jar":
            with zipfile.ZipFile(jar) as archive:
                manifest = archive.read("META-INF/MANIFEST.MF").decode()
            if m := re.search(r"^Implementation-Version: *(\S+)", manifest, re.MULTILINE):
                return m[1]
    return "local"


# ---------------------------------------------------------------- building


def stage_context(cache: Path, name: str, files: Mapping[str, Iterable[Path]]) -> Path:
    """A fresh build context ``cache/context/NAME`` holding ``files`` (folder in the context -> files)
    and the image's own files from ``deploy/docker/NAME``. Files are hard links where possible."""
    context = cache / "context" / name
    shutil.rmtree(context, ignore_errors=True)
    shutil.copytree(DOCKERFILES / name, context)
    for folder, paths in files.items():
        (context / folder).mkdir(parents=True, exist_ok=True)
        for path in paths:
            target = context / folder / path.name
            try:
                os.link(path.resolve(), target)
            except OSError:
                shutil.copy2(path, target)
    return context


def docker_build(
    tag: str,
    context: Path,
    build_args: Mapping[str, str],
    *,
    target: str | None = None,
) -> str:
    """``docker build`` with no network (apt-get and pip install only the staged files), Docker's layer
    cache on, and the label that :func:`prune_superseded` looks for."""
    args = [arg for key, value in build_args.items() for arg in ("--build-arg", f"{key}={value}")]
    target_args = ["--target", target] if target is not None else []
    docker(
        "build", "--force-rm", "--network", "none", "--label", LOCAL_LABEL, *target_args, *args,
        "--tag", tag, str(context), env={"DOCKER_BUILDKIT": "0"}, timeout=900,
    )  # fmt: skip
    return tag


def build_control_plane(python: str) -> str:
    """The project's image from its Dockerfile on the local Python. Its build stage is tagged too, so
    that the stage stays cached and a superseded one is an untagged image that can be pruned."""
    docker_build(f"{CONTROL_PLANE_IMAGE}-build", REPO, {"PYTHON_IMAGE": python}, target="build")
    return docker_build(CONTROL_PLANE_IMAGE, REPO, {"PYTHON_IMAGE": python})


def prune_superseded() -> None:
    """Remove the local images that a rebuild left untagged (only those this module labelled)."""
    docker("image", "prune", "--force", "--filter", "dangling=true", "--filter", f"label={LOCAL_LABEL}")


def build_all(cache: Path = DEFAULT_CACHE) -> LocalImages:
    """Every local image, each rebuilt only as far as its inputs changed."""
    from zkserver.zookeeper_jars import resolve_classpath

    base = build_base(cache)
    status = base_dpkg_status(base, cache)
    archives = cache / "apt"
    debs = {name: deb_packages(packages, status, archives) for name, packages in IMAGE_PACKAGES.items()}
    from_base = {"BASE_IMAGE": base}

    python_context = stage_context(cache, "python", {"debs": debs["python"], "wheels": _wheels(cache)})
    python = docker_build(f"{PREFIX}/python:3.11", python_context, from_base)

    jars = zookeeper_jars(resolve_classpath().entries)
    zookeeper_context = stage_context(cache, "zookeeper", {"debs": debs["zookeeper"], "lib": jars})
    zookeeper = docker_build(f"{PREFIX}/zookeeper:{zookeeper_version(jars)}", zookeeper_context, from_base)

    prometheus_context = stage_context(cache, "prometheus", {"debs": debs["prometheus"]})
    prometheus = docker_build(f"{PREFIX}/prometheus:{SUITE}", prometheus_context, from_base)

    control_plane = build_control_plane(python)
    prune_superseded()
    return LocalImages(base, python, zookeeper, prometheus, control_plane)


def _wheels(cache: Path) -> list[Path]:
    return sorted(build_wheelhouse(cache).glob("*.whl"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.images",
        description="Build the local images (no registry needed) and print the variables for compose.",
    )
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="cache directory (.run/docker)")
    parser.add_argument("--json", action="store_true", help="print the image names as JSON")
    args = parser.parse_args(argv)
    images = build_all(args.cache)
    if args.json:
        print(json.dumps(asdict(images), indent=2))
    else:
        for key, value in images.compose_environment().items():
            print(f"export {key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
