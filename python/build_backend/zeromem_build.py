"""A PEP 517 build backend for the pure-Python zeromem package, standard library only.

pip builds a project in an isolated environment holding only the project's
declared build requirements; with setuptools declared, `pip install ./python`
would have to download it, and fails where no package index is reachable.
This backend requires nothing: it zips zeromem/*.py with the metadata of
pyproject.toml's [project] table into a py3-none-any wheel (PEP 427, core
metadata 2.1), an editable wheel (PEP 660: a .pth file naming this folder),
or a source tarball.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: reproducible wheels


def _project():
    """[project] string fields and [project.scripts] of pyproject.toml.

    tomllib (Python >= 3.11) where there is one; else the `key = "value"`
    lines this project's pyproject.toml is written with."""
    with open(os.path.join(_HERE, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib is not None:
        doc = tomllib.loads(raw.decode("utf-8"))
        project = dict(doc["project"])
        return project, dict(project.pop("scripts", {}))
    project, scripts, table = {}, {}, None
    for line in raw.decode("utf-8").splitlines():
        line = line.strip()
        if line.startswith("["):
            table = line.strip("[]").strip()
            continue
        m = re.match(r'^([A-Za-z0-9_.-]+)\s*=\s*"([^"]*)"$', line)
        if m and table == "project":
            project[m.group(1)] = m.group(2)
        elif m and table == "project.scripts":
            scripts[m.group(1)] = m.group(2)
    return project, scripts


def _dist_name(project):
    return "%s-%s" % (re.sub(r"[-_.]+", "_", project["name"]).lower(), project["version"])


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"], "Version: " + project["version"]]
    if project.get("description"):
        lines.append("Summary: " + project["description"])
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    readme = os.path.join(_HERE, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _dist_info(project, scripts):
    """The .dist-info files but RECORD, as (name, bytes)."""
    files = [("METADATA", _metadata(project)),
             ("WHEEL", b"Wheel-Version: 1.0\nGenerator: zeromem_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")]
    if scripts:
        text = "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))
        files.append(("entry_points.txt", text.encode("utf-8")))
    return files


def _package_files():
    """zeromem/*.py as (archive name, bytes), sorted."""
    out = []
    pkg = os.path.join(_HERE, "zeromem")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                out.append(("zeromem/" + name, f.read()))
    return out


def _write_wheel(wheel_directory, payload):
    project, scripts = _project()
    dist = _dist_name(project)
    info = dist + ".dist-info/"
    entries = list(payload) + [(info + n, b) for n, b in _dist_info(project, scripts)]
    record = []
    for name, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "RECORD,,")
    entries.append((info + "RECORD", ("\n".join(record) + "\n").encode("utf-8")))
    filename = dist + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            zi = zipfile.ZipInfo(name, _EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("zeromem_editable.pth", (_HERE + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    project, _ = _project()
    dist = _dist_name(project)
    filename = dist + ".tar.gz"
    members = [("pyproject.toml", None), ("README.md", None), ("build_backend/zeromem_build.py", None)]
    members += [(n, None) for n, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel, _ in members:
            path = os.path.join(_HERE, rel)
            if os.path.exists(path):
                t.add(path, arcname=dist + "/" + rel, recursive=False)
        data = _metadata(project)
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return filename
