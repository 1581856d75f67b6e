"""A PEP 517 build backend for the one-module sandman client.

The client has no dependencies, so its build needs none either: this
backend writes the wheel (a zip with the module and its .dist-info) and
the sdist with the standard library alone, which lets
`pip install --no-index clients/python` work offline. The project's name
and version come from pyproject.toml."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = "sandman_client.py"


def _project():
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    section = text.split("[project]", 1)[1]
    fields = dict(re.findall(r'^(name|version|description|requires-python)\s*=\s*"([^"]*)"',
                             section, re.M))
    return fields


def _metadata():
    p = _project()
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
            "Description-Content-Type: text/markdown\n\n%s"
            % (p["name"], p["version"], p["description"], p["requires-python"], readme))


def _dist_name():
    p = _project()
    return p["name"].replace("-", "_"), p["version"]


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version = _dist_name()
    info = "%s-%s.dist-info" % (name, version)
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return info


def _wheel(wheel_directory, files):
    name, version = _dist_name()
    info = "%s-%s.dist-info" % (name, version)
    wheel_name = "%s-%s-py3-none-any.whl" % (name, version)
    files = dict(files)
    files[info + "/METADATA"] = _metadata().encode()
    files[info + "/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: sandman_backend\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = [_record_line(p, d) for p, d in files.items()] + [info + "/RECORD,,"]
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for p, d in files.items():
            z.writestr(p, d)
    return wheel_name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    data = open(os.path.join(ROOT, MODULE), "rb").read()
    return _wheel(wheel_directory, {MODULE: data})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file that puts this folder on sys.path.
    return _wheel(wheel_directory, {"sandman_client_editable.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    name, version = _dist_name()
    base = "%s-%s" % (name, version)
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", MODULE, "example.py",
                    "packaging/sandman_backend.py"):
            t.add(os.path.join(ROOT, rel), arcname=base + "/" + rel)
        pkg = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg)
        t.addfile(ti, io.BytesIO(pkg))
    return os.path.basename(path)
